// dtype conversion (the master -> compute weight copy) against the host's
// round-to-nearest-even encoders: bit-exact, on padded views, every pair.
#include <tuple>

#include "cuda/gpu_test_util.h"

namespace tinyllama::gpu_test {
namespace {

using ConvertParam = std::tuple<DType, DType>;  // (from, to)

class GpuConvert : public GpuParamTest<ConvertParam> {};

TEST_P(GpuConvert, RoundsToNearestEven) {
  const auto [from, to] = GetParam();
  Harness h(DType::F32);
  const std::int64_t rows = 9, cols = 131;
  // Values across many binades, including ones that fp16 holds as subnormals.
  std::vector<double> values(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double mag = std::ldexp(1.0 + h.rng().uniform(), static_cast<int>(i % 40) - 26);
    values[i] = (i % 3 == 0 ? -1.0 : 1.0) * mag;
  }
  const Twin src = h.from_values(rows, cols, from, values, 3);
  const Twin dst = h.output(rows, cols, to, 1);
  h.gpu().convert(dst.gpu, src.gpu);
  // The expected bits: the source's value through fp32, rounded to `to`.
  const std::vector<double> got = h.device_values(dst.gpu);
  const std::vector<double> in = Harness::host_values(src.cpu);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double want = round_to(static_cast<float>(in[i]), to);
    ASSERT_EQ(got[i], want) << "element " << i << " value " << in[i];
  }
  EXPECT_TRUE(h.padding_intact(dst.gpu)) << "convert wrote past the end of a row";
}

std::string convert_name(const ::testing::TestParamInfo<ConvertParam>& info) {
  const auto [from, to] = info.param;
  return dtype_label(from) + "_to_" + dtype_label(to);
}

INSTANTIATE_TEST_SUITE_P(AllPairs, GpuConvert,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::ValuesIn(gpu_dtypes())),
                         convert_name);

}  // namespace
}  // namespace tinyllama::gpu_test
