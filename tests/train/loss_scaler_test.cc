#include "train/loss_scaler.h"

#include <gtest/gtest.h>

namespace tinyllama {
namespace {

TEST(LossScaler, DisabledNeverScalesOrSkips) {
  LossScaler s(false);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 1.0);
}

TEST(LossScaler, HalvesAndSkipsOnOverflow) {
  LossScaler s(true, 1024.0, 3);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 512.0);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 256.0);
}

TEST(LossScaler, GrowsAfterARunOfCleanSteps) {
  LossScaler s(true, 1024.0, 3);
  EXPECT_FALSE(s.update(false));
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 2048.0);
  // An overflow resets the run.
  s.update(false);
  s.update(true);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 2048.0);
}

}  // namespace
}  // namespace tinyllama
