// runs_svg's helpers (bench_suite/run_curve.h): the running mean of a
// training loss, and the validation chart's axis of evaluated steps.
#include "bench_suite/run_curve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tinyllama::suite {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

TEST(RunCurve, RunningMeanAveragesTheLastFiniteValues) {
  const std::vector<double> got = running_mean({kNan, 4, 2, kNan, 9, 1, 5}, 3);
  ASSERT_EQ(got.size(), 7u);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_DOUBLE_EQ(got[1], 4);
  EXPECT_DOUBLE_EQ(got[2], 3);
  EXPECT_DOUBLE_EQ(got[3], 3);  // a NaN step repeats the mean so far
  EXPECT_DOUBLE_EQ(got[4], 5);  // (4 + 2 + 9) / 3
  EXPECT_DOUBLE_EQ(got[5], 4);  // (2 + 9 + 1) / 3: the 4 left the window
  EXPECT_DOUBLE_EQ(got[6], 5);  // (9 + 1 + 5) / 3
  EXPECT_EQ(running_mean({1, 2, 3}, 1), (std::vector<double>{1, 2, 3}));
}

TEST(RunCurve, EvaluatedStepsAreTheUnionOfTheRunsEvaluations) {
  LabelledCurve a{"a", {}}, b{"b", {}};
  a.curve.steps = {1, 2, 3, 4};
  a.curve.val_loss = {kNan, 2.0, kNan, 1.5};
  b.curve.steps = {2, 3, 5};
  b.curve.val_loss = {2.1, 1.9, kNan};
  EXPECT_EQ(evaluated_steps({a, b}), (std::vector<int>{2, 3, 4}));
  EXPECT_TRUE(evaluated_steps({}).empty());
}

}  // namespace
}  // namespace tinyllama::suite
