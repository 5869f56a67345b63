#include "bench_suite/regression.h"

#include <cmath>
#include <map>

#include "core/errors.h"

namespace tinyllama::suite {

void check_rule(const RegressionRule& rule) {
  if (!rule.max_slowdown && !rule.min_speedup) {
    throw UsageError("--baseline: needs --max-slowdown X or --min-speedup X");
  }
  if (rule.max_slowdown && !(*rule.max_slowdown >= 0)) {
    throw UsageError("--max-slowdown " + fixed(*rule.max_slowdown, 3) +
                     ": expected a fraction >= 0 (0.05: 5 % slower at most)");
  }
  if (rule.min_speedup && !(*rule.min_speedup > 0)) {
    throw UsageError("--min-speedup " + fixed(*rule.min_speedup, 3) +
                     ": expected a ratio > 0 (1.0: not slower than the baseline)");
  }
}

namespace {

// Clocks more than this far apart are named beside a regression: the same
// kernels take longer at a lower clock (a GPU at its power cap, another
// card), so the slowdown may not be the code's.
constexpr double kClockTolerance = 0.03;

std::string clock_note(const PointResult& before, const PointResult& now) {
  if (!before.sm_mhz || !now.sm_mhz || *before.sm_mhz <= 0) return "";
  if (std::abs(*now.sm_mhz / *before.sm_mhz - 1) <= kClockTolerance) return "";
  return "; the GPU's SM clock was " + fixed(*now.sm_mhz, 0) + " MHz against " +
         fixed(*before.sm_mhz, 0) + " MHz in the baseline (power-capped in " +
         fixed(now.power_capped_pct.value_or(0), 0) + " % of samples against " +
         fixed(before.power_capped_pct.value_or(0), 0) + " %): the clock explains part of it";
}

}  // namespace

RegressionResult compare_to_baseline(const BenchReport& baseline, const BenchReport& current,
                                     const RegressionRule& rule) {
  std::map<std::string, const PointResult*> base_points;
  for (const PointResult& r : baseline.points) base_points[r.match_key()] = &r;
  RegressionResult result;
  std::map<std::string, bool> matched;
  for (const PointResult& now : current.points) {
    const std::string key = now.match_key();
    const auto it = base_points.find(key);
    if (it == base_points.end()) {
      result.only_in_current.push_back(key);
      continue;
    }
    matched[key] = true;
    const PointResult& before = *it->second;
    if (!before.ok) continue;  // nothing to hold this run to
    PointComparison c;
    c.key = key;
    c.baseline_ms = before.ms_per_step;
    if (!now.ok) {
      c.regressed = true;
      c.why = "failed (baseline " + fixed(before.ms_per_step, 3) + " ms): " + now.error;
      result.compared.push_back(c);
      continue;
    }
    c.current_ms = now.ms_per_step;
    c.speedup = now.ms_per_step > 0 ? before.ms_per_step / now.ms_per_step : 0;
    const double slowdown = now.ms_per_step / before.ms_per_step - 1;
    const std::string figures =
        fixed(now.ms_per_step, 3) + " ms against " + fixed(before.ms_per_step, 3) + " ms";
    if (rule.max_slowdown && slowdown > *rule.max_slowdown) {
      c.regressed = true;
      c.why = figures + ": " + fixed(100 * slowdown, 1) + " % slower, above --max-slowdown " +
              fixed(100 * *rule.max_slowdown, 1) + " %";
    } else if (rule.min_speedup && c.speedup < *rule.min_speedup) {
      c.regressed = true;
      c.why = figures + ": speed-up " + fixed(c.speedup, 3) + ", below --min-speedup " +
              fixed(*rule.min_speedup, 3);
    }
    if (c.regressed) c.why += clock_note(before, now);
    result.compared.push_back(c);
  }
  for (const PointResult& before : baseline.points) {
    if (!matched.count(before.match_key())) result.only_in_baseline.push_back(before.match_key());
  }
  for (const PointComparison& c : result.compared) result.failed = result.failed || c.regressed;
  if (rule.strict && (!result.only_in_baseline.empty() || !result.only_in_current.empty())) {
    result.failed = true;
  }
  return result;
}

std::string RegressionResult::describe(const RegressionRule& rule) const {
  std::string out;
  int regressed = 0;
  for (const PointComparison& c : compared) {
    if (!c.regressed) continue;
    ++regressed;
    out += "regressed: " + c.key + ": " + c.why + "\n";
  }
  const char* missing_tag = rule.strict ? "missing (fails under --strict)" : "missing";
  for (const std::string& k : only_in_baseline) {
    out += std::string(missing_tag) + ": " + k + ": in the baseline, not in this run\n";
  }
  for (const std::string& k : only_in_current) {
    out += std::string(missing_tag) + ": " + k + ": in this run, not in the baseline\n";
  }
  out += "regression check: " + std::to_string(compared.size()) + " points compared, " +
         std::to_string(regressed) + " regressed, " +
         std::to_string(only_in_baseline.size() + only_in_current.size()) +
         " unmatched: " + (failed ? "FAILED" : "passed") + "\n";
  return out;
}

}  // namespace tinyllama::suite
