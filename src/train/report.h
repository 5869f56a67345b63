#pragma once
// What a run tells its user (DESIGN §4): the per-step line, the closing
// human summary and the machine-readable JSON report.
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "train/options.h"
#include "train/trainer.h"

namespace tinyllama {

// One line saying what is about to run: model, batch, steps, level,
// precision and device.
std::string format_run_header(const TrainOptions& opts);

// `step 10/50 | loss 6.9312 | 3674.9 samples/s | 2.18 ms | peak 490.0 MB`,
// plus ` | skipped (overflow), scale 32768` when fp16 skipped the update.
// peak_mb is the run's peak so far (TrainSummary::peak_mb).
std::string format_step_line(const StepRecord& rec, const TrainOptions& opts, double peak_mb);

// Whether step rec.step gets a line: the first, every log_every-th, the last.
bool should_log_step(int step, const TrainOptions& opts);

// `warm-up 1/5 | loss 6.9964 | 4123.51 ms`, for the warm-up steps that
// should_log_warmup picks (the same rule over the warm-up steps), so a slow
// run shows progress before its first timed step.
std::string format_warmup_line(const StepRecord& rec, const TrainOptions& opts);
bool should_log_warmup(int step, const TrainOptions& opts);

// The progress line a terminal shows between step lines, after `done` of
// the run's warm-up + timed steps, at s_per_step wall-clock seconds a step:
// `warm-up 3/5 | 4.12 s/step | ETA 3m34s` or `step 12/50 | ...`, the ETA
// covering every step left.
std::string format_progress_line(int done, const TrainOptions& opts, double s_per_step);
// 42s, 3m05s, 1h02m.
std::string format_duration(double seconds);

// Several lines, each ending in '\n'.
std::string format_summary(const TrainSummary& summary, const TrainOptions& opts);

// The JSON report: the DESIGN §4 keys, the full config, device and memory.
nlohmann::json json_report(const TrainSummary& summary, const TrainOptions& opts);

// Writes json_report to path atomically (io/atomic_file.h: a unique temporary
// file renamed over it, or written through for /dev/stdout, /dev/null, a
// pipe), so a reader never sees half a report. Throws RuntimeFailure.
void write_json_report(const std::string& path, const TrainSummary& summary,
                       const TrainOptions& opts);

}  // namespace tinyllama
