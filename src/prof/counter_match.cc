#include "prof/counter_match.h"

#include <algorithm>

namespace tinyllama::prof {

CounterMatch match_counter_ranges(std::vector<ProfiledLaunch> profiled, int steps,
                                  const std::vector<MetricValues>& ranges) {
  CounterMatch m;
  const std::size_t per_step = ranges.size();
  if (per_step == 0) {
    m.note = "the counter step gave no ranges (no kernel was profiled)";
    return m;
  }
  if (steps <= 0 || profiled.size() != per_step * static_cast<std::size_t>(steps)) {
    m.note = "not matched to kernels: the counter step launched " + std::to_string(per_step) +
             " kernels, the " + std::to_string(steps) + " profiled step(s) " +
             std::to_string(profiled.size()) + " in all";
    return m;
  }
  // Kernels of successive steps do not interleave on the device: by start
  // time, the last per_step are the last step's, in launch order.
  std::stable_sort(
      profiled.begin(), profiled.end(),
      [](const ProfiledLaunch& a, const ProfiledLaunch& b) { return a.start_ns < b.start_ns; });
  const std::size_t first = profiled.size() - per_step;
  for (std::size_t i = 0; i < per_step; ++i) {
    m.launches.push_back({profiled[first + i].kernel, profiled[first + i].op, ranges[i]});
  }
  return m;
}

}  // namespace tinyllama::prof
