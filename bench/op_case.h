#pragma once
// One op variant set up at one shape, as the kernel bench drives it: the
// case owns its device buffers (allocated and filled when it is made, sized
// from the shapes), enqueues the op through the Backend interface, and
// checks one run against the CPU reference backend.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "model/backend.h"
#include "model/config.h"

namespace tinyllama::bench {

// Elements the CPU reference handles per tensor in an elementwise check:
// 2^24 (16.8 M) is exactly one [tokens, D] activation of the B32 S1024 and
// 1 B presets, so RMSNorm's weight gradient (a sum over every row) is
// checked at all three presets; wider tensors (the FFN's, the logits) are
// checked on their leading rows. A check stays within a fraction of a second.
constexpr std::int64_t kCheckElements = std::int64_t{1} << 24;

// What every case needs to size, fill and run its op. Dtypes follow the
// conventions of model/backend.h, as the training step uses them.
// Which pass of an op a case runs.
enum class Pass { Forward, Backward };

struct BenchContext {
  Backend& gpu;
  ModelConfig cfg;
  BatchShape batch;
  Precision precision;
  std::uint64_t seed = 20261123;
  // The CPU reference's budget per tensor in elementwise checks (the tests
  // lower it to reach the slicing at small shapes).
  std::int64_t check_elements = kCheckElements;

  std::int64_t tokens() const { return batch.tokens(); }
  // Activations and the weight copy the GEMMs read.
  DType act() const { return precision.compute; }
  // Weight gradients, parameters and AdamW moments.
  DType master() const { return precision.master; }
  // RMSNorm rstd, attention log-sum-exp, per-position losses.
  DType stats() const { return precision.stats(); }
  AttentionShape attention() const {
    return AttentionShape{batch.batch, batch.seq, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim()};
  }
};

// One comparison of a GPU run with the CPU reference.
struct CheckResult {
  // The largest, over the compared outputs, of max|gpu - cpu| / max|cpu|;
  // infinity when an output holds a non-finite value (an element the op
  // did not write still holds the NaN it was poisoned with).
  double max_rel_err = 0;
  std::string worst;  // the output with that error, e.g. "dq"
  std::string scope;  // what was compared, e.g. "batch row 0, kv heads 0 and 3"
};

// Thrown by a case's factory when the device cannot run that variant at
// all (e.g. a kernel of another GPU generation): the runner reports the
// variant skipped with this reason instead of failed.
class OpSkipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class OpCase {
 public:
  virtual ~OpCase() = default;
  // Enqueues the op once on the backend's stream. Allocates nothing and
  // never waits for the device, so it can be enqueued many times back to
  // back or recorded into a CUDA graph.
  virtual void run() = 0;
  // Copies the inputs the reference needs, runs the op once, and compares
  // its outputs with the CPU backend's on the same inputs. Called before
  // any run(): in-place and accumulating ops are checked from the state
  // the case was made with.
  virtual CheckResult check() = 0;
};

}  // namespace tinyllama::bench
