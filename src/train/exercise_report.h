#pragma once
// The lines of the debugging exercise (docs/EXERCISES.md): which faults a
// run was given, the logits after each step (--log-logit-stats) and the
// unsynchronised host-clock phase times beside the event-timed ones
// (--inject unsynced-timing).
#include <string>

#include "model/faults.h"
#include "train/options.h"
#include "train/trainer.h"

namespace tinyllama {

// "inject | broken-init, naive-swiglu: exercise faults (docs/EXERCISES.md), this
// run's figures are not real measurements".
std::string injected_faults_line(const InjectedFaults& faults);

// "logits step 3/50 | mean -0.0012 | std 0.4521 | max 2.3100" (warm-up
// steps: "logits warm-up 2/5 | ..."). rec.logits must be set.
std::string format_logit_line(const StepRecord& rec, const TrainOptions& opts, bool warmup);

// "timing step 3/50 | host clock, no sync: fwd 0.05 + bwd 0.08 + opt 0.01 = 0.14 ms |
// events: fwd 0.91 + bwd 1.80 + opt 0.30 = 3.01 ms", and on the CPU, whose
// backend runs each op before returning, a note that the two agree there.
std::string format_host_timing_line(const StepRecord& rec, const TrainOptions& opts, bool warmup);

}  // namespace tinyllama
