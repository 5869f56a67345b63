#pragma once
// The training loop: warm-up steps, timed steps, per-phase timing, loss
// history and the summary every report is made from.
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "prof/gpu_clocks.h"
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
  double lr = 0;          // the learning rate of the step's update (the schedule's)
  // The global L2 norm of the step's unscaled gradient, before clipping;
  // NaN when the plan does not compute it (UpdateRecipe::needs_norm).
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  // Data parallel: a rank had a stop request (a signal) when this step was
  // launched; every rank sees the same value, so all stop together.
  bool stop_agreed = false;
  // The host clock between the calls that issue the phases, without
  // synchronising: the time the host spent enqueueing each phase, not the
  // device's (the exercise fault unsynced-timing prints them; a graph
  // replay issues the whole step in its "forward").
  double host_forward_ms = 0;
  double host_backward_ms = 0;
  double host_optimizer_ms = 0;
  // --log-logit-stats: the step's logits summarised (Model::logit_stats).
  std::optional<LogitStats> logits;
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
  // Data parallel: the ranks (1 otherwise); samples_per_s and tokens_per_s
  // are the whole run's (every rank's), tokens_per_s_per_rank one rank's;
  // `memory` is one rank's (ZeRO-1 shards the optimizer state).
  int ranks = 1;
  double tokens_per_s_per_rank = 0;
  std::string parallel;  // DataParallel::describe() and the collectives, or "off"

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
  // The GPU's SM clock, power and what held the clock down, sampled through
  // NVML over the timed steps (a GPU at its power cap runs the same kernels
  // slower). Empty on the cpu backend and under --profile, whose summary
  // has its own.
  std::optional<prof::ClockReport> clocks;
  // --profile: the printed profile summary (the files are already written).
  std::string profile_report;
  // --enable-memory-profiling: the line saying what the timeline found and
  // where it went.
  std::string memory_profile_report;

  // Why the run stopped before its last step; the summary then covers the
  // steps done. Diverged: a non-finite loss (not an fp16 skipped step).
  enum class Stop { Completed, Interrupted, Diverged };
  Stop stop = Stop::Completed;
  int signal = 0;            // Interrupted: the signal (SIGINT, SIGTERM)
  std::string stop_message;  // one line: what stopped the run, naming the step
  // --resume: the checkpoint read and its steps done (0: a fresh run).
  std::string resumed_from;
  int resumed_steps = 0;
  int steps_done = 0;  // at the end, warm-up and resumed steps included
  // --checkpoint-dir: the last checkpoint written.
  std::string checkpoint;
  // --eval-every: validation losses, after which timed step.
  struct Eval {
    int after_step = 0;
    double loss = 0;
  };
  std::vector<Eval> evals;
  // An output that could not be written after training (--save-weights):
  // the summary and --json still follow, then this line and exit 1.
  std::string save_error;
};

using StepCallback =
    std::function<void(const StepRecord&, const TrainOptions&, const TrainSummary&)>;
// One line about the run as it goes: an evaluation, a checkpoint, a resume.
using NoteCallback = std::function<void(const std::string&)>;
// A warm-up step finished: rec.step counts the warm-up steps from 1 (they
// are not in TrainSummary::steps), rec.ms is its time, not a measurement.
using WarmupCallback = std::function<void(const StepRecord&, const TrainOptions&)>;

// Runs the whole job described by opts. Throws UsageError / RuntimeFailure.
// A signal (train/interrupt.h) stops it between steps: the summary then
// covers the steps done (stop == Interrupted), as it does when the loss
// stops being finite (Diverged).
// Data parallel (opts.plan.parallel.enabled): `collectives` joins this
// rank to the others. Every rank draws the same global batch of
// shape.batch * world rows and trains on its own block of them; only rank
// 0 writes files (checkpoints, weights, dumps, the profile); the reads of
// sharded state they need are made on every rank.
TrainSummary train(const TrainOptions& opts, const StepCallback& on_step,
                   const NoteCallback& on_note = {}, const WarmupCallback& on_warmup = {},
                   Collectives* collectives = nullptr);

}  // namespace tinyllama
