#pragma once
// `train --validate-setup` and the debugging exercise's per-step lines
// (train/setup_check.h, train/exercise_report.h).
#include "progress_line.h"

#include "train/options.h"
#include "train/trainer.h"

namespace tinyllama::cli {

// Resolves the check's options, runs it, prints each finding and the
// verdict. Returns 0 on PASS; throws RuntimeFailure with the first failed
// finding on FAIL (exit 1).
int run_validate_setup(TrainOptions opts);

// After a step: the logits line (--log-logit-stats) and the host-clock
// timing line (--inject unsynced-timing), every step.
void print_exercise_lines(const StepRecord& rec, const TrainOptions& opts, bool warmup,
                          ProgressLine& progress);

}  // namespace tinyllama::cli
