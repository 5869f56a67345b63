#include "bench_suite/regression.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace tinyllama::suite {
namespace {

BenchReport report_of(const std::vector<std::pair<int, double>>& seq_ms) {
  BenchReport r;
  for (const auto& [seq, ms] : seq_ms) {
    PointResult p;
    p.point = {"v2", "fp32", 4, seq, {}};
    p.model = "D32 L2 H4 K2 F128 vocab 64";
    p.ok = true;
    p.ms_per_step = ms;
    r.points.push_back(p);
  }
  return r;
}

TEST(Regression, UnchangedRunPasses) {
  const BenchReport base = report_of({{16, 4.0}, {32, 8.0}});
  const RegressionResult r = compare_to_baseline(base, base, {0.05, std::nullopt, false});
  EXPECT_FALSE(r.failed);
  ASSERT_EQ(r.compared.size(), 2u);
  EXPECT_DOUBLE_EQ(r.compared[0].speedup, 1.0);
}

TEST(Regression, PlantedSlowdownFailsNamingThePointAndBothFigures) {
  const BenchReport base = report_of({{16, 4.0}, {32, 8.0}});
  const BenchReport now = report_of({{16, 4.1}, {32, 9.0}});  // +2.5 %, +12.5 %
  const RegressionRule rule{0.05, std::nullopt, false};
  const RegressionResult r = compare_to_baseline(base, now, rule);
  EXPECT_TRUE(r.failed);
  EXPECT_FALSE(r.compared[0].regressed);
  EXPECT_TRUE(r.compared[1].regressed);
  const std::string text = r.describe(rule);
  EXPECT_NE(text.find("regressed: D32 L2 H4 K2 F128 vocab 64 | v2 fp32 B4 S32: 9.000 ms against "
                      "8.000 ms: 12.5 % slower"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("S16:"), std::string::npos) << "the point within the threshold is not named";
}

// A regression measured at another clock says so, with both clocks; the
// same clock (within 3 %) or an unknown one adds nothing.
TEST(Regression, ARegressionAtAnotherClockNamesBothClocks) {
  BenchReport base = report_of({{16, 4.0}, {32, 8.0}});
  BenchReport now = report_of({{16, 4.6}, {32, 9.0}});
  base.points[0].sm_mhz = 1980;
  base.points[0].power_capped_pct = 0;
  now.points[0].sm_mhz = 1530;
  now.points[0].power_capped_pct = 100;
  base.points[1].sm_mhz = 1710;
  now.points[1].sm_mhz = 1700;
  const RegressionRule rule{0.05, std::nullopt, false};
  const RegressionResult r = compare_to_baseline(base, now, rule);
  ASSERT_TRUE(r.compared[0].regressed);
  ASSERT_TRUE(r.compared[1].regressed);
  EXPECT_NE(r.compared[0].why.find("; the GPU's SM clock was 1530 MHz against 1980 MHz in the "
                                   "baseline (power-capped in 100 % of samples against 0 %)"),
            std::string::npos)
      << r.compared[0].why;
  EXPECT_EQ(r.compared[1].why.find("clock"), std::string::npos) << r.compared[1].why;
  now.points[1].sm_mhz.reset();
  EXPECT_EQ(compare_to_baseline(base, now, rule).compared[1].why.find("clock"), std::string::npos);
}

TEST(Regression, MinSpeedupHoldsTheRunToAFactor) {
  const BenchReport base = report_of({{16, 4.0}});
  const BenchReport now = report_of({{16, 3.0}});  // 1.33x
  EXPECT_FALSE(compare_to_baseline(base, now, {std::nullopt, 1.3, false}).failed);
  EXPECT_TRUE(compare_to_baseline(base, now, {std::nullopt, 1.4, false}).failed);
}

TEST(Regression, AFailedPointRegressesAndMissingOnesFailOnlyWhenStrict) {
  const BenchReport base = report_of({{16, 4.0}, {32, 8.0}});
  BenchReport now = report_of({{16, 4.0}, {64, 16.0}});
  EXPECT_FALSE(compare_to_baseline(base, now, {0.05, std::nullopt, false}).failed);
  const RegressionResult strict = compare_to_baseline(base, now, {0.05, std::nullopt, true});
  EXPECT_TRUE(strict.failed);
  EXPECT_EQ(strict.only_in_baseline.size(), 1u);
  EXPECT_EQ(strict.only_in_current.size(), 1u);
  now.points[0].ok = false;
  now.points[0].error = "out of memory";
  const RegressionResult failed = compare_to_baseline(base, now, {0.05, std::nullopt, false});
  EXPECT_TRUE(failed.failed);
  EXPECT_NE(failed.describe({0.05, std::nullopt, false}).find("failed (baseline 4.000 ms)"),
            std::string::npos);
}

TEST(Regression, RuleNeedsAThreshold) {
  EXPECT_THROW(check_rule({}), UsageError);
  EXPECT_THROW(check_rule({-0.1, std::nullopt, false}), UsageError);
  EXPECT_THROW(check_rule({std::nullopt, 0.0, false}), UsageError);
  EXPECT_NO_THROW(check_rule({0.0, std::nullopt, false}));
}

}  // namespace
}  // namespace tinyllama::suite
