#pragma once
// The training loop: warm-up steps, timed steps, per-phase timing, loss
// history and the summary every report is made from.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "train/options.h"

namespace tinyllama {

struct StepRecord {
  int step = 0;  // 1-based among the timed steps
  double loss = 0;
  double ms = 0;  // whole step
  // The phases; NaN when they could not be measured (TrainSummary::phases_timed).
  double forward_ms = 0;
  double backward_ms = 0;
  double optimizer_ms = 0;
  bool skipped = false;   // fp16 overflow: update skipped
  double loss_scale = 1;  // fp16 dynamic loss scale in force
};

struct TrainSummary {
  std::vector<StepRecord> steps;  // timed steps only
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double ms_per_step = 0;  // mean over timed steps
  // Host wall-clock time per timed step, profiled steps excluded: from the
  // start of the first such step to the end of the last, over their count.
  // The loop enqueues a step before reading the last one's loss, so this
  // approaches ms_per_step when the host keeps ahead of the device and
  // exceeds it when the host is the bottleneck (many eager launches).
  double wall_ms_per_step = 0;
  double forward_ms = 0;
  double backward_ms = 0;
  double optimizer_ms = 0;
  double final_loss = 0;
  // Peak memory in MB (1e6 bytes): everything tinyllama allocated on the
  // device (parameters, gradients, optimizer state, activation arena, library
  // workspaces) -- the analog of torch.cuda.max_memory_allocated.
  double peak_mb = 0;
  // The most device memory in use for the whole process, as the driver counts
  // it, sampled after every step (CUDA context included); 0 on the CPU.
  double device_used_peak_mb = 0;
  MemoryBreakdown memory;
  std::string device_name;  // e.g. "cpu (x86_64, 2 threads)" or "NVIDIA H100 80GB HBM3"
  std::int64_t parameter_count = 0;

  // How the steps ran: "eager", or "cuda_graph" (one captured step replayed).
  std::string execution = "eager";
  // Why the level's cuda_graphs did not take effect, or why the phase split
  // is missing; empty when there is nothing to say.
  std::string execution_note;
  // One step's device work by graph node type, kernel launches first;
  // counted on the captured graph (eager runs: on a capture made only to
  // count). Empty on the cpu backend.
  std::optional<GraphStats> launches;
  // False when forward/backward/optimizer could not be timed inside the
  // graph; the *_ms phase fields are then NaN (null in the JSON report).
  bool phases_timed = true;
  // --profile: the printed profile summary (the files are already written).
  std::string profile_report;
};

using StepCallback =
    std::function<void(const StepRecord&, const TrainOptions&, const TrainSummary&)>;

// Runs the whole job described by opts. Throws UsageError / RuntimeFailure.
TrainSummary train(const TrainOptions& opts, const StepCallback& on_step);

}  // namespace tinyllama
