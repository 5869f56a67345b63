// The debugging exercise's naive-swiglu kernel (docs/EXERCISES.md) is slow,
// not wrong: out = x · wᵀ against the CPU reference GEMM in every dtype, at
// awkward sizes with padded rows, and more rows than one grid dimension holds.
#include <cstdint>
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/linear/cpu_gemm.h"

namespace tinyllama::gpu_test {
namespace {

using NaiveParam = std::tuple<DType, std::int64_t>;  // (dtype, rows)

class GpuNaiveLinear : public GpuParamTest<NaiveParam> {};

TEST_P(GpuNaiveLinear, MatchesTheReferenceGemm) {
  const auto [t, rows] = GetParam();
  Harness h(t);
  const std::int64_t inner = 97, cols = 203;  // the gate and up rows of an F 101 layer
  const Twin x = h.input(rows, inner, t, 1.0, 3);
  const Twin w = h.input(cols, inner, t, 0.1, 1);
  const Twin out = h.output(rows, cols, t, 2);
  cpu::gemm(out.cpu, x.cpu, false, w.cpu, true, 1.0, 0.0);
  h.gpu().naive_linear(out.gpu, x.gpu, w.gpu);
  h.expect_close(out, tolerance(t), "naive_linear");
}

std::string naive_name(const ::testing::TestParamInfo<NaiveParam>& info) {
  return dtype_label(std::get<0>(info.param)) + "_rows" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuNaiveLinear,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values<std::int64_t>(37, 65537)),
                         naive_name);

}  // namespace
}  // namespace tinyllama::gpu_test
