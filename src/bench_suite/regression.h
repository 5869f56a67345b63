#pragma once
// `bench --baseline OLD.json`: each point of this run against the point of
// the baseline with the same model and key, by ms/step. A point regressed
// when it is slower than the thresholds allow, or failed where the baseline
// ran; points found on one side only are listed and fail only when strict.
#include <optional>
#include <string>
#include <vector>

#include "bench_suite/report.h"

namespace tinyllama::suite {

struct RegressionRule {
  // Fails when now/baseline - 1 exceeds it (0.05: more than 5 % slower).
  std::optional<double> max_slowdown;
  // Fails when baseline/now falls below it (1.0: must not be slower).
  std::optional<double> min_speedup;
  bool strict = false;  // points on one side only fail too
};

struct PointComparison {
  std::string key;  // PointResult::match_key()
  double baseline_ms = 0;
  double current_ms = 0;
  double speedup = 0;  // baseline_ms / current_ms
  bool regressed = false;
  std::string why;  // for a regressed point: which rule, with both figures
};

struct RegressionResult {
  std::vector<PointComparison> compared;
  std::vector<std::string> only_in_baseline;
  std::vector<std::string> only_in_current;
  bool failed = false;  // any regressed point, or a missing one under strict
  // One line per regressed or missing point, then a closing verdict line.
  std::string describe(const RegressionRule& rule) const;
};

// UsageError when neither threshold is set or one is out of range.
void check_rule(const RegressionRule& rule);

RegressionResult compare_to_baseline(const BenchReport& baseline, const BenchReport& current,
                                     const RegressionRule& rule);

}  // namespace tinyllama::suite
