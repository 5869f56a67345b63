#pragma once
// Summaries of repeated timings. Medians, not means: one repetition that
// an unrelated interruption stretched must not move the figure.
#include <vector>

namespace tinyllama::bench {

// The p-th percentile (0 <= p <= 100) by linear interpolation between the
// closest ranks (numpy's default); NaN for no samples.
double percentile(std::vector<double> samples, double p);
inline double median(const std::vector<double>& samples) {
  return percentile(samples, 50);
}
// NaN for no samples.
double minimum(const std::vector<double>& samples);

}  // namespace tinyllama::bench
