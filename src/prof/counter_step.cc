#include "prof/counter_step.h"

#include <algorithm>
#include <vector>

#include "prof/counter_match.h"
#include "prof/kernel_stats.h"

namespace tinyllama::prof {

bool CounterStep::begin(std::size_t kernels_per_step_hint) {
  if (!wanted_ || begun_) return false;
  begun_ = true;
  launched_ = true;
  // Room for twice the step's kernels: a range past the limit is dropped
  // (and counted), not an error.
  collector_ = CounterCollector::start(std::max<std::size_t>(4096, 2 * kernels_per_step_hint),
                                       &unavailable_);
  return true;
}

void CounterStep::end_launch() {
  if (!collector_) return;
  std::string why;
  if (!collector_->stop(&readout_, &why)) unavailable_ = why;
  collector_.reset();
}

bool CounterStep::end_step(double step_ms) {
  if (!launched_) return false;
  launched_ = false;
  step_ms_ = step_ms;
  return true;
}

CounterInputs CounterStep::inputs(const GpuActivity* gpu, const Attribution& attribution,
                                  int steps) const {
  CounterInputs in;
  if (!begun_) {
    in.unavailable =
        "hardware counters not collected: no step ran after the profiled ones "
        "(--num-steps must exceed --profile-steps)";
    return in;
  }
  in.unavailable = unavailable_;
  if (gpu == nullptr && in.unavailable.empty()) {
    in.unavailable = "hardware counters unavailable: no kernel records to match them to";
  }
  if (!in.unavailable.empty()) return in;
  std::vector<ProfiledLaunch> profiled;
  for (std::size_t i = 0; i < gpu->kernels.size(); ++i) {
    if (!attribution.kernel_in_step[i]) continue;
    profiled.push_back(
        {demangle(gpu->kernels[i].name), attribution.kernel_ops[i], gpu->kernels[i].start_ns});
  }
  std::vector<MetricValues> ranges = readout_.ranges;
  if (readout_.baseline_launches > 0) {
    for (MetricValues& r : ranges) r = net_of_replay(r, readout_.replay_baseline);
  }
  CounterMatch match = match_counter_ranges(std::move(profiled), steps, ranges);
  in.launches = std::move(match.launches);
  in.match_note = match.note;
  in.ranges = readout_.ranges.size();
  in.passes = readout_.passes;
  in.dropped_ranges = readout_.dropped_ranges;
  in.refused = readout_.refused;
  in.counter_step_ms = step_ms_;
  in.replay_baseline = readout_.replay_baseline;
  in.baseline_launches = readout_.baseline_launches;
  return in;
}

}  // namespace tinyllama::prof
