#pragma once
// The workshop's v3 debugging exercise as faults a run can be given on
// purpose (`train --inject NAME`, docs/EXERCISES.md). Each changes only what
// its name says; a run with any of them says so in its header, its summary
// and its --json, so that none of its figures can pass for a real one.
#include <string>
#include <vector>

namespace tinyllama {

struct InjectedFaults {
  // Weights drawn N(0, 1) instead of N(0, 0.02) (model/init.h): the logits
  // explode and the first loss sits far above ln(vocab).
  bool broken_init = false;
  // The attention forward reads K and V row by row per lane, uncoalesced,
  // instead of the flash kernel's tiles (ExerciseOps::strided_kv_attention_
  // forward; on the CPU the reference loops instead of BLAS). Needs the
  // flash plan, whose backward reads the lse it leaves.
  bool noncontiguous_kv = false;
  // Phase times read from host clocks around the enqueueing calls, without
  // synchronising, printed beside the event-timed phases.
  bool unsynced_timing = false;
  // The SwiGLU FFN's gate and up projections computed with one thread per
  // output reducing over D instead of GEMMs (ExerciseOps::naive_linear; on the
  // CPU the reference loops instead of BLAS). The backward pass is the same.
  bool naive_swiglu = false;

  bool any() const { return broken_init || noncontiguous_kv || unsynced_timing || naive_swiglu; }
  // The names of the faults set, in the order of fault_names().
  std::vector<std::string> names() const;
};

// Every fault's name: broken-init, noncontiguous-kv, unsynced-timing, naive-swiglu.
const std::vector<std::string>& fault_names();

// Sets the fault `name` (one name, or several separated by commas). Throws
// UsageError naming the flag, the value and every valid name.
void add_fault(InjectedFaults& faults, const std::string& name);

}  // namespace tinyllama
