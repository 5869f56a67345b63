#pragma once
// The transient progress line of `tinyllama train` on a terminal: after each
// finished step (warm-up or timed) it redraws `step 12/50 | 3.91 s/step |
// ETA 2m48s` in place, and it is erased before every permanent line (step
// lines, the summary), so a log captured from a terminal reads like one
// captured from a pipe. Off when stdout is not a terminal.
#include <chrono>
#include <deque>

#include "train/options.h"

namespace tinyllama::cli {

class ProgressLine {
 public:
  // Enabled when stdout is a terminal (and TERM is not "dumb").
  explicit ProgressLine(const TrainOptions& opts);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // A step finished: `done` of warm-up + timed steps so far; step_ms its
  // time (StepRecord::ms), the rate the ETA is computed from.
  void step_done(int done, double step_ms);
  // Erase the line (before a permanent line is printed).
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  const TrainOptions& opts_;
  bool enabled_ = false;
  bool shown_ = false;
  Clock::time_point last_draw_;
  std::deque<double> recent_ms_;  // the last few steps' times
  int reported_ = 0;              // steps this process has finished
};

}  // namespace tinyllama::cli
