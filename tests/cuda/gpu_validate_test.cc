// `tinyllama validate`'s CUDA cases (train/numerics_check.h): each level at
// each precision on the K = H/2 config passes against the float64 CPU
// reference, with the second step a captured graph's first replay where the
// level captures, and the mixed-precision limits above the float32 ones
// (they come from the rounded baseline, not the fp32 tolerance).
#include <iostream>
#include <string>
#include <tuple>

#include "gpu_test_util.h"
#include "model/tolerance.h"
#include "train/numerics_check.h"

namespace tinyllama::gpu_test {
namespace {

using ValidateParam = std::tuple<std::string, DType>;  // (level, compute dtype)

class GpuValidate : public GpuParamTest<ValidateParam> {};

TEST_P(GpuValidate, LevelPassesAgainstTheFloat64Reference) {
  const auto [level, t] = GetParam();
  const NumericsCase c{validation_configs()[1], level, DeviceKind::Cuda, precision_for(t)};
  const NumericsResult r = check_numerics(c);
  for (const ErrorCheck& e : r.checks) {
    EXPECT_TRUE(e.pass()) << "step " << e.step << " " << e.quantity << ": " << e.error << " > "
                          << e.limit;
    if (low_precision(t) && e.quantity.rfind("adamw", 0) != 0) {
      EXPECT_GE(e.baseline, 0.0) << e.quantity;
      EXPECT_GT(e.limit, compute_ulp(t) * 0.999) << e.quantity;
    }
  }
  EXPECT_EQ(r.captured, level != "v1") << r.plan;
  const ErrorCheck* grad = r.worst("grad");
  std::cout << "[ validate ] " << level << " " << dtype_label(t) << ": worst grad " << grad->error
            << " / " << grad->limit << " (" << grad->quantity << ")\n";
}

std::string validate_name(const ::testing::TestParamInfo<ValidateParam>& info) {
  return std::get<0>(info.param) + "_" + dtype_label(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(LevelsAndPrecisions, GpuValidate,
                         ::testing::Combine(::testing::Values("v1", "v2", "v3"),
                                            ::testing::ValuesIn(gpu_dtypes())),
                         validate_name);

}  // namespace
}  // namespace tinyllama::gpu_test
