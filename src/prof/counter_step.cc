#include "prof/counter_step.h"

#include <algorithm>
#include <vector>

#include "prof/counter_match.h"
#include "prof/kernel_stats.h"

namespace tinyllama::prof {

bool CounterStep::begin(std::size_t kernels_per_step_hint) {
  if (!wanted_ || begun_ == 2 || (begun_ == 1 && !unavailable_.empty())) return false;
  ++begun_;
  launched_ = true;
  // Room for twice the step's kernels: a range past the limit is dropped
  // (and counted), not an error.
  const std::size_t ranges = std::max<std::size_t>(4096, 2 * kernels_per_step_hint);
  if (begun_ == 1) {
    // CUPTI stays attached: the DRAM pass may follow in the next step.
    collector_ =
        CounterCollector::start(ranges, all_metrics(), /*detach_at_stop=*/false, &unavailable_);
  } else {
    collector_ =
        CounterCollector::start(ranges, dram_pass_metrics(), /*detach_at_stop=*/true, &dram_note_);
  }
  return true;
}

void CounterStep::end_launch() {
  if (!collector_) return;
  std::string why;
  CounterReadout* out = begun_ == 1 ? &readout_ : &dram_readout_;
  if (!collector_->stop(out, &why)) {
    (begun_ == 1 ? unavailable_ : dram_note_) = why;
    collector_->detach_when_released();  // no DRAM pass follows a failed step
  }
  collector_.reset();
}

bool CounterStep::end_step(double step_ms) {
  if (!launched_) return false;
  launched_ = false;
  if (begun_ == 1) step_ms_ = step_ms;
  return true;
}

namespace {

// A readout's ranges net of what its replay adds (counters.h).
std::vector<MetricValues> net_ranges(const CounterReadout& r) {
  std::vector<MetricValues> ranges = r.ranges;
  if (r.baseline_launches > 0) {
    for (MetricValues& v : ranges) v = net_of_replay(v, r.replay_baseline);
  }
  return ranges;
}

}  // namespace

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
  std::vector<MetricValues> ranges = net_ranges(readout_);
  if (begun_ < 2) {
    in.dram_note = "no step followed the counter step for the DRAM pass";
  } else if (!dram_note_.empty()) {
    in.dram_note = dram_note_;
  } else {
    std::string note;
    ranges = with_dram_pass(std::move(ranges), net_ranges(dram_readout_), &note);
    in.dram_note = note;
    if (note.empty()) in.dram_passes = dram_readout_.passes;
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
