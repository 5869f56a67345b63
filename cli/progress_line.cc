#include "progress_line.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "train/report.h"

namespace tinyllama::cli {
namespace {

constexpr std::size_t kRecentSteps = 5;  // the rate follows the last 5 steps
constexpr double kRedrawSeconds = 0.25;  // fast (GPU) runs redraw at most 4 times a second

bool stdout_is_terminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) == 1 && !(term != nullptr && std::strcmp(term, "dumb") == 0);
}

}  // namespace

ProgressLine::ProgressLine(const TrainOptions& opts)
    : opts_(opts), enabled_(stdout_is_terminal()), last_draw_(Clock::now()) {}

ProgressLine::~ProgressLine() {
  clear();
}

void ProgressLine::step_done(int done, double step_ms) {
  if (!enabled_) return;
  // The run's first step (after --resume too) carries one-off costs
  // (allocation, autotuning, capture): it sets the rate only until the
  // next one replaces it.
  if (++reported_ == 2) recent_ms_.clear();
  recent_ms_.push_back(step_ms);
  if (recent_ms_.size() > kRecentSteps) recent_ms_.pop_front();
  if (done >= opts_.warmup_steps + opts_.num_steps) {
    clear();
    return;
  }
  // Steps are reported in bursts (two in flight); the times are their own.
  const Clock::time_point now = Clock::now();
  if (shown_ && std::chrono::duration<double>(now - last_draw_).count() < kRedrawSeconds) return;
  double sum_ms = 0;
  for (double ms : recent_ms_) sum_ms += ms;
  const double s_per_step = sum_ms / static_cast<double>(recent_ms_.size()) / 1e3;
  std::cout << "\r\033[K" << format_progress_line(done, opts_, s_per_step) << std::flush;
  shown_ = true;
  last_draw_ = now;
}

void ProgressLine::clear() {
  if (!shown_) return;
  std::cout << "\r\033[K" << std::flush;
  shown_ = false;
}

}  // namespace tinyllama::cli
