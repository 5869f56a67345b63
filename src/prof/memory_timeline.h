#pragma once
// The memory of one training step, op by op, exact: which activation
// buffers hold data the step still needs at each op, from the accesses the
// passes make (prof/access_trace.h) laid over the arena plan
// (model/activation_plan.h), beside the memory that stays allocated all run
// (parameters, gradients, AdamW state, workspaces, the arena itself).
//
// A buffer is live during an op when the op touches it, or when it was
// written earlier in the step and a later op reads what is in it. A write
// that covers the whole buffer ends the life of what it held; a partial one
// (a loss chunk's rows) does not. The arena gives every buffer its own bytes
// for the whole run, so the live total never exceeds the arena, and the gap
// between the two is what a lifetime-aware layout could give back.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/activation_plan.h"
#include "model/model.h"
#include "prof/access_trace.h"

namespace tinyllama::prof {

struct TimelineBuffer {
  std::string name;          // "layer3.qkv"; "tokens", "targets" (not in the arena)
  std::string kind;          // kActivationKinds, or "tokens"
  std::int64_t offset = -1;  // in the arena; -1: a buffer of its own
  std::int64_t bytes = 0;
  // Ops (inclusive index ranges) during which it is live, in order.
  std::vector<std::pair<int, int>> lifetimes;
  int first_op() const { return lifetimes.empty() ? -1 : lifetimes.front().first; }
  int last_op() const { return lifetimes.empty() ? -1 : lifetimes.back().second; }
  bool live_at(int op) const;
};

struct TimelineOp {
  std::string name;   // the marker path, "backward/layer2/attention"
  std::string phase;  // its first part: forward, backward, optimizer, loss_readback
  std::int64_t live_bytes = 0;
};

struct MemoryTimeline {
  std::vector<TimelineOp> ops;
  std::vector<TimelineBuffer> buffers;
  std::int64_t arena_bytes = 0;
  // Arena bytes two buffers count: the backward scratch laid over the
  // logits (ActivationBuffer::over_logits). The buffers' bytes add up to
  // arena_bytes + shared_bytes.
  std::int64_t shared_bytes = 0;
  MemoryBreakdown allocated;  // what the run holds all along (Model::estimate_memory)
  int peak_op = -1;           // the first op with the most live bytes
  std::int64_t peak_live_bytes = 0;
  // Live bytes of each kind at op `op`, in the order of kinds().
  std::vector<std::int64_t> live_by_kind(int op) const;
  // kActivationKinds that have a buffer here, then "tokens".
  std::vector<std::string> kinds() const;
};

// The timeline of a trace: `ops` recorded with the arena at `arena`, laid
// out by `buffers` (ActivationPlan::buffers()); `extra` are buffers outside
// the arena that live through the whole step (the token ids).
MemoryTimeline analyse_accesses(const std::vector<TracedOp>& ops, const char* arena,
                                const std::vector<ActivationBuffer>& buffers,
                                std::vector<TimelineBuffer> extra);

// One step of cfg at shape under plan (resolved), traced on an
// AccessTraceBackend: the calls the trainer's StepRunner makes (forward
// pass, backward pass with the per-layer updates, optimizer pass, the
// loss readback). Takes a blink even for a large model: nothing computes.
MemoryTimeline trace_memory_timeline(const ModelConfig& cfg, BatchShape shape,
                                     const StepPlan& plan);

}  // namespace tinyllama::prof
