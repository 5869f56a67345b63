// The RMSNorms that write FP8 codes (NormOps::rmsnorm_forward_fp8,
// rmsnorm_apply_fp8; ops/norm/cuda_rmsnorm_fp8.cu) against the two ops each
// replaces on the same device -- rmsnorm_forward or rmsnorm_apply, then
// quantize_fp8 -- bit for bit: both copies'
// codes, the scale block (the amax raised under delayed scaling, untouched
// with a kept scale), and the bf16 output where it is kept. Shapes of
// whole 64 x 64 tiles take the fused kernel; the others (and current
// scaling) take the two ops inside the backend, and must agree all the
// same. The two ops are checked against the CPU elsewhere
// (gpu_rmsnorm_test.cc, gpu_fp8_cast_test.cc).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "ops/linear/gpu_fp8_util.h"

namespace tinyllama::gpu_test {
namespace {

struct NormShape {
  std::int64_t rows, dim, pad;  // pad: extra elements per row of x and out
};

// 128 x 256, 64 x 64 and 256 x 512 (padded rows) are whole aligned tiles;
// 96 x 200 and 200 x 128 are not.
const NormShape kShapes[] = {
    {128, 256, 0}, {64, 64, 0}, {256, 512, 8}, {96, 200, 0}, {200, 128, 0}};

using NormFp8Param = std::tuple<NormShape, Fp8ScaleFrom>;

class GpuRmsnormFp8 : public Fp8GpuParamTest<NormFp8Param> {};

TEST_P(GpuRmsnormFp8, ApplyWritesTheCodesTheTwoOpsWrite) {
  const auto [s, from] = GetParam();
  for (const bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "output kept" : "output scratch");
    Harness h(DType::BF16, 48);
    const Twin x = h.input(s.rows, s.dim, DType::BF16, 1.5, s.pad);
    const Twin w = h.input(1, s.dim, DType::BF16, 0.3, 0, 1.0);
    std::vector<double> inv(static_cast<std::size_t>(s.rows));
    for (double& v : inv) v = 0.5 + h.rng().uniform();
    const Twin rstd = h.from_values(s.rows, 1, DType::F32, inv);
    const Twin out = h.output(s.rows, s.dim, DType::BF16, s.pad);
    const Twin out_ref = h.output(s.rows, s.dim, DType::BF16, s.pad);
    Fp8Buffers fused(s.rows, s.dim, Fp8Format::E4M3, kHeldScale, kEarlierAmax);
    Fp8Buffers ref(s.rows, s.dim, Fp8Format::E4M3, kHeldScale, kEarlierAmax);

    h.gpu().rmsnorm_apply(out_ref.gpu, x.gpu, w.gpu, rstd.gpu);
    h.gpu().quantize_fp8(out_ref.gpu, ref.q, from);
    h.gpu().rmsnorm_apply_fp8(out.gpu, x.gpu, w.gpu, rstd.gpu, fused.q, from, keep);
    expect_same_fp8(fused, ref, "rmsnorm_apply_fp8");
    if (keep) EXPECT_EQ(h.device_values(out.gpu), h.device_values(out_ref.gpu));
  }
}

// The forward's norm with its row-major codes (a row a warp: any rows of
// whole 16-byte vectors fuse), rstd as rmsnorm_forward's.
TEST_P(GpuRmsnormFp8, ForwardWritesTheCodesTheTwoOpsWrite) {
  const auto [s, from] = GetParam();
  for (const bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "output kept" : "output scratch");
    Harness h(DType::BF16, 49);
    const Twin x = h.input(s.rows, s.dim, DType::BF16, 1.5, s.pad);
    const Twin w = h.input(1, s.dim, DType::BF16, 0.3, 0, 1.0);
    const Twin rstd = h.output(s.rows, 1, DType::F32);
    const Twin rstd_ref = h.output(s.rows, 1, DType::F32);
    const Twin out = h.output(s.rows, s.dim, DType::BF16, s.pad);
    const Twin out_ref = h.output(s.rows, s.dim, DType::BF16, s.pad);
    Fp8Buffers fused(s.rows, s.dim, Fp8Format::E4M3, kHeldScale, kEarlierAmax);
    Fp8Buffers ref(s.rows, s.dim, Fp8Format::E4M3, kHeldScale, kEarlierAmax);
    constexpr double kEps = 1e-5;

    h.gpu().rmsnorm_forward(out_ref.gpu, rstd_ref.gpu, x.gpu, w.gpu, kEps);
    h.gpu().quantize_fp8(out_ref.gpu, ref.q.direct_only(), from);
    h.gpu().rmsnorm_forward_fp8(out.gpu, rstd.gpu, x.gpu, w.gpu, kEps, fused.q.direct_only(), from,
                                keep);
    expect_same_fp8(fused, ref, "rmsnorm_forward_fp8");
    EXPECT_EQ(h.device_values(rstd.gpu), h.device_values(rstd_ref.gpu)) << "rstd";
    if (keep) EXPECT_EQ(h.device_values(out.gpu), h.device_values(out_ref.gpu));
  }
}

std::string shape_name(const ::testing::TestParamInfo<NormFp8Param>& info) {
  const auto& [s, from] = info.param;
  return std::to_string(s.rows) + "x" + std::to_string(s.dim) + (s.pad != 0 ? "_padded_" : "_") +
         scale_label(from);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuRmsnormFp8,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Values(Fp8ScaleFrom::History,
                                                              Fp8ScaleFrom::Kept,
                                                              Fp8ScaleFrom::Amax)),
                         shape_name);

}  // namespace
}  // namespace tinyllama::gpu_test
