#include "train/exercise_report.h"

#include <cstdio>

namespace tinyllama {
namespace {

std::string step_label(const StepRecord& rec, const TrainOptions& opts, bool warmup) {
  return (warmup ? "warm-up " : "step ") + std::to_string(rec.step) + "/" +
         std::to_string(warmup ? opts.warmup_steps : opts.num_steps);
}

}  // namespace

std::string injected_faults_line(const InjectedFaults& faults) {
  std::string names;
  for (const std::string& n : faults.names()) names += (names.empty() ? "" : ", ") + n;
  return "inject | " + names +
         ": exercise faults (docs/EXERCISES.md), this run's figures are not real measurements";
}

std::string format_logit_line(const StepRecord& rec, const TrainOptions& opts, bool warmup) {
  char line[160];
  std::snprintf(line, sizeof line, "logits %s | mean %.4f | std %.4f | max %.4f",
                step_label(rec, opts, warmup).c_str(), rec.logits->mean, rec.logits->std,
                rec.logits->max);
  return line;
}

std::string format_host_timing_line(const StepRecord& rec, const TrainOptions& opts, bool warmup) {
  const double host = rec.host_forward_ms + rec.host_backward_ms + rec.host_optimizer_ms;
  const double events = rec.forward_ms + rec.backward_ms + rec.optimizer_ms;
  char line[320];
  std::snprintf(line, sizeof line,
                "timing %s | host clock, no sync: fwd %.3f + bwd %.3f + opt %.3f = %.3f ms | "
                "events: fwd %.3f + bwd %.3f + opt %.3f = %.3f ms",
                step_label(rec, opts, warmup).c_str(), rec.host_forward_ms, rec.host_backward_ms,
                rec.host_optimizer_ms, host, rec.forward_ms, rec.backward_ms, rec.optimizer_ms,
                events);
  std::string out = line;
  if (opts.plan.device == DeviceKind::Cpu) {
    out += " (the cpu backend runs each op before returning: host clocks are true times here)";
  }
  return out;
}

}  // namespace tinyllama
