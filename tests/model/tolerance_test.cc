// The tolerances `validate` judges by are the parity test's: the numbers are
// read back from tests/python/parity_config.py, and each metric is checked on
// values whose answer is known by construction.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "model/tolerance.h"

namespace tinyllama {
namespace {

// The value assigned to `name` at the start of a line of the parity
// script's constants.
double parity_constant(const std::string& name) {
  std::ifstream in(std::string(TINYLLAMA_SOURCE_DIR) + "/tests/python/parity_config.py");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::smatch m;
  const std::regex assignment("\n" + name + " = ([0-9.eE+-]+)");
  if (!std::regex_search(s, m, assignment)) return NAN;
  return std::stod(m[1].str());
}

TEST(Tolerance, TheParityTestStatesTheSameNumbers) {
  EXPECT_EQ(parity_constant("TOL_FP32"), kFp32Tolerance);
  EXPECT_EQ(parity_constant("TOL_ADAMW"), kAdamwTolerance);
  EXPECT_EQ(parity_constant("AMP_FACTOR"), kAmpFactor);
}

TEST(Tolerance, UlpIsTheDtypesEpsilon) {
  // eps: the gap between 1 and the next value of the dtype.
  EXPECT_EQ(1.0 + compute_ulp(DType::BF16), 1.0078125);    // 8 significant bits
  EXPECT_EQ(1.0 + compute_ulp(DType::F16), 1.0009765625);  // 11 significant bits
  EXPECT_EQ(static_cast<float>(1.0 + compute_ulp(DType::F32)), std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(amp_limit(0.25, DType::BF16), 2 * 0.25 + compute_ulp(DType::BF16));
}

TEST(Tolerance, MaxRelErrorIsTheLargestDifferenceOverTheLargestReference) {
  const std::vector<double> ref = {4.0, -8.0, 1.0};
  const std::vector<double> actual = {4.5, -8.0, 0.0};  // differences 0.5, 0, 1
  EXPECT_DOUBLE_EQ(max_rel_error(actual.data(), ref.data(), 3), 1.0 / 8.0);
  const std::vector<double> bad = {4.0, NAN, 1.0};
  EXPECT_TRUE(std::isinf(max_rel_error(bad.data(), ref.data(), 3)));
  const std::vector<double> zeros = {0.0, 0.0};
  const std::vector<double> off = {0.0, -3e-3};
  EXPECT_DOUBLE_EQ(max_rel_error(off.data(), zeros.data(), 2), 3e-3);
}

TEST(Tolerance, AdamwErrorForgivesTwoFp32UlpsAndCountsTheRestInUpdates) {
  const std::vector<double> before = {0.5, -0.25};
  const std::vector<double> ref = {0.4997, -0.2497};  // updates of 3e-4
  const float ulp = std::nextafter(0.4997f, 1.0f) - 0.4997f;
  // One ulp off: forgiven.
  std::vector<double> actual = {ref[0] + ulp, ref[1]};
  EXPECT_EQ(adamw_step_error(actual.data(), ref.data(), before.data(), 2), 0.0);
  // A missing weight decay (lr * wd * w = 3e-4 * 0.01 * 0.5) is 5e-3 of the update.
  actual = {ref[0] + 1.5e-6, ref[1]};
  const double e = adamw_step_error(actual.data(), ref.data(), before.data(), 2);
  EXPECT_GT(e, kAdamwTolerance);
  EXPECT_NEAR(e, (1.5e-6 - 2 * ulp) / 3e-4, 1e-9);
}

TEST(Tolerance, ParamGroupPoolsTheLayers) {
  EXPECT_EQ(param_group("layers.3.wqkv"), "wqkv");
  EXPECT_EQ(param_group("layers.12.ffn_norm"), "ffn_norm");
  EXPECT_EQ(param_group("embedding"), "embedding");
  EXPECT_EQ(param_group("final_norm"), "final_norm");
}

}  // namespace
}  // namespace tinyllama
