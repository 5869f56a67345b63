#pragma once
// The median of a list of figures: the profiler's summaries (step times,
// clocks) and the bench reports take theirs the same way.
#include <algorithm>
#include <vector>

namespace tinyllama {

// The middle value (the mean of the two middle ones for an even count); 0
// for an empty list.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tinyllama
