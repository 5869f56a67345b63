// The learning-rate schedules (train/lr_schedule.h) at the points their
// formulas pin down; tests/python/test_recipe_parity.py holds every step of
// the binary's runs to an independent formula, LambdaLR and nanoGPT.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "train/lr_schedule.h"

namespace tinyllama {
namespace {

LrSchedule schedule(LrDecay decay, int warmup, int total) {
  LrSchedule s;
  s.decay = decay;
  s.peak = 1e-3;
  s.floor = 1e-4;
  s.warmup = warmup;
  s.total = total;
  s.decay_steps = 10;
  return s;
}

TEST(LrSchedule, WarmUpRisesLinearlyToThePeakAtItsLastStep) {
  for (LrDecay d : {LrDecay::Constant, LrDecay::Cosine, LrDecay::Linear, LrDecay::Wsd}) {
    const LrSchedule s = schedule(d, 4, 50);
    EXPECT_DOUBLE_EQ(s.at(0), 0.25e-3);
    EXPECT_DOUBLE_EQ(s.at(2), 0.75e-3);
    EXPECT_DOUBLE_EQ(s.at(3), 1e-3);
  }
}

TEST(LrSchedule, DecaysStartAtThePeakAndHalveTheSpanMidway) {
  const LrSchedule cosine = schedule(LrDecay::Cosine, 10, 110);
  EXPECT_DOUBLE_EQ(cosine.at(10), 1e-3);
  EXPECT_NEAR(cosine.at(60), 0.55e-3, 1e-15);  // p = 1/2: halfway between peak and floor
  EXPECT_GT(cosine.at(109), 1e-4);             // the floor comes one step past the last
  EXPECT_NEAR(cosine.at(109), 1e-4 + 0.9e-3 * (1 + std::cos(M_PI * 0.99)) / 2, 1e-18);
  const LrSchedule linear = schedule(LrDecay::Linear, 0, 100);
  EXPECT_DOUBLE_EQ(linear.at(0), 1e-3);
  EXPECT_NEAR(linear.at(50), 0.55e-3, 1e-15);
  EXPECT_NEAR(linear.at(99), 1e-4 + 0.9e-3 * 0.01, 1e-18);
}

TEST(LrSchedule, WsdHoldsThePeakThenDecaysOverItsLastSteps) {
  const LrSchedule wsd = schedule(LrDecay::Wsd, 5, 60);  // decay over steps 50..59
  EXPECT_DOUBLE_EQ(wsd.at(5), 1e-3);
  EXPECT_DOUBLE_EQ(wsd.at(49), 1e-3);
  EXPECT_DOUBLE_EQ(wsd.at(50), 1e-3);
  EXPECT_NEAR(wsd.at(55), 0.55e-3, 1e-15);
  EXPECT_NEAR(wsd.at(59), 1e-4 + 0.9e-3 * 0.1, 1e-18);
}

TEST(LrSchedule, NamesParseBackAndAnUnknownOneIsRefused) {
  for (LrDecay d : {LrDecay::Constant, LrDecay::Cosine, LrDecay::Linear, LrDecay::Wsd}) {
    EXPECT_EQ(parse_lr_decay(lr_decay_name(d)), d);
  }
  EXPECT_THROW(parse_lr_decay("exponential"), UsageError);
  EXPECT_NE(schedule(LrDecay::Cosine, 3, 20).describe().find("3 warm-up"), std::string::npos);
}

}  // namespace
}  // namespace tinyllama
