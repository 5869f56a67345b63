// The SwiGLU passes that write FP8 codes (SwigluOps::swiglu_forward_fp8,
// swiglu_backward_fp8; ops/swiglu/cuda_swiglu_fp8.cu) against the two ops
// they replace on the same device -- swiglu_forward / swiglu_backward, then
// quantize_fp8 -- bit for bit: every code of both copies, the scale block
// (the amax raised under delayed scaling, untouched with a kept scale), and
// the bf16 result where it is kept. Shapes of whole 64 x 64 tiles take the
// fused kernel (current scaling, which needs the amax first, twice: a pass
// that records only the amax, then the codes); the others take the two ops
// inside the backend, and must agree all the same.
// The two ops themselves are checked against the CPU reference elsewhere
// (gpu_elementwise_test.cc, gpu_fp8_cast_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "ops/linear/cpu_fp8.h"
#include "ops/linear/fp8_tensor.h"
#include "ops/linear/gpu_fp8_util.h"

namespace tinyllama::gpu_test {
namespace {

struct SwigluShape {
  std::int64_t rows, ffn, pad;  // pad: extra elements per row of every bf16 view
};

// 128 x 192, 64 x 64, 256 x 128 (padded rows) and 1024 x 512 are whole
// aligned tiles (the fused kernel); 96 x 80 and 200 x 64 are not.
const SwigluShape kShapes[] = {{128, 192, 0},  {64, 64, 0}, {256, 128, 8},
                               {1024, 512, 0}, {96, 80, 0}, {200, 64, 0}};

using SwigluFp8Param = std::tuple<SwigluShape, Fp8ScaleFrom>;

class GpuSwigluFp8 : public Fp8GpuParamTest<SwigluFp8Param> {};

TEST_P(GpuSwigluFp8, ForwardWritesTheCodesTheTwoOpsWrite) {
  const auto [s, from] = GetParam();
  for (const bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "hidden kept" : "hidden scratch");
    Harness h(DType::BF16, 45);
    const Twin gu = h.input(s.rows, 2 * s.ffn, DType::BF16, 2.0, s.pad);
    const Mat gate = gu.gpu.col_block(0, s.ffn);
    const Mat up = gu.gpu.col_block(s.ffn, s.ffn);
    const Twin hidden = h.output(s.rows, s.ffn, DType::BF16, s.pad);
    const Twin hidden_ref = h.output(s.rows, s.ffn, DType::BF16, s.pad);
    Fp8Buffers fused(s.rows, s.ffn, Fp8Format::E4M3, kHeldScale, kEarlierAmax);
    Fp8Buffers ref(s.rows, s.ffn, Fp8Format::E4M3, kHeldScale, kEarlierAmax);

    h.gpu().swiglu_forward(hidden_ref.gpu, gate, up);
    h.gpu().quantize_fp8(hidden_ref.gpu, ref.q, from);
    h.gpu().swiglu_forward_fp8(hidden.gpu, gate, up, fused.q, from, keep);
    expect_same_fp8(fused, ref, "swiglu_forward_fp8");
    if (keep) EXPECT_EQ(h.device_values(hidden.gpu), h.device_values(hidden_ref.gpu));
  }
}

TEST_P(GpuSwigluFp8, BackwardWritesTheCodesTheTwoOpsWrite) {
  const auto [s, from] = GetParam();
  for (const bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "gradients kept" : "gradients scratch");
    Harness h(DType::BF16, 46);
    const Twin gu = h.input(s.rows, 2 * s.ffn, DType::BF16, 2.0, s.pad);
    const Twin dh = h.input(s.rows, s.ffn, DType::BF16, 0.5, s.pad);
    const Mat gate = gu.gpu.col_block(0, s.ffn);
    const Mat up = gu.gpu.col_block(s.ffn, s.ffn);
    const Twin dgu = h.output(s.rows, 2 * s.ffn, DType::BF16, s.pad);
    const Twin dgu_ref = h.output(s.rows, 2 * s.ffn, DType::BF16, s.pad);
    Fp8Buffers fused(s.rows, 2 * s.ffn, Fp8Format::E5M2, kHeldScale, kEarlierAmax);
    Fp8Buffers ref(s.rows, 2 * s.ffn, Fp8Format::E5M2, kHeldScale, kEarlierAmax);

    h.gpu().swiglu_backward(dgu_ref.gpu.col_block(0, s.ffn), dgu_ref.gpu.col_block(s.ffn, s.ffn),
                            dh.gpu, gate, up);
    h.gpu().quantize_fp8(dgu_ref.gpu, ref.q, from);
    h.gpu().swiglu_backward_fp8(dgu.gpu, dh.gpu, gate, up, fused.q, from, keep);
    expect_same_fp8(fused, ref, "swiglu_backward_fp8");
    if (keep) EXPECT_EQ(h.device_values(dgu.gpu), h.device_values(dgu_ref.gpu));
  }
}

// The fused kernels must not write what they were not asked for: a
// scratch result stays as it was (the poison), an absent copy unwritten.
TEST_P(GpuSwigluFp8, WritesOnlyWhatItIsAsked) {
  const auto [s, from] = GetParam();
  if (s.rows % 64 != 0 || s.ffn % 64 != 0) GTEST_SKIP() << "not whole tiles: the two ops run";
  Harness h(DType::BF16, 47);
  const Twin gu = h.input(s.rows, 2 * s.ffn, DType::BF16, 2.0, s.pad);
  const Twin hidden = h.output(s.rows, s.ffn, DType::BF16, s.pad);
  Fp8Buffers q(s.rows, s.ffn, Fp8Format::E4M3, kHeldScale, kEarlierAmax);
  const std::vector<std::uint8_t> untouched = q.codes_t.download<std::uint8_t>(q.codes_t.bytes());
  h.gpu().swiglu_forward_fp8(hidden.gpu, gu.gpu.col_block(0, s.ffn), gu.gpu.col_block(s.ffn, s.ffn),
                             q.q.direct_only(), from, false);
  const std::vector<double> after = h.device_values(hidden.gpu);
  for (const double v : after) ASSERT_TRUE(std::isnan(v)) << "hidden was written";
  EXPECT_EQ(q.codes_t.download<std::uint8_t>(q.codes_t.bytes()), untouched)
      << "the transposed copy was written";
}

// A result with no memory at all (Fp8Linears::swiglu_keeps_codes: a
// shape, data null), the forward's two copies written in one pass: the
// codes of the two ops all the same.
TEST_P(GpuSwigluFp8, ForwardWithNoResultBufferWritesTheSameCodes) {
  const auto [s, from] = GetParam();
  if (s.rows % 64 != 0 || s.ffn % 64 != 0) GTEST_SKIP() << "not whole tiles: the two ops run";
  Harness h(DType::BF16, 48);
  const Twin gu = h.input(s.rows, 2 * s.ffn, DType::BF16, 2.0, s.pad);
  const Mat gate = gu.gpu.col_block(0, s.ffn);
  const Mat up = gu.gpu.col_block(s.ffn, s.ffn);
  const Twin hidden_ref = h.output(s.rows, s.ffn, DType::BF16, s.pad);
  Fp8Buffers fused(s.rows, s.ffn, Fp8Format::E4M3, kHeldScale, kEarlierAmax);
  Fp8Buffers ref(s.rows, s.ffn, Fp8Format::E4M3, kHeldScale, kEarlierAmax);
  h.gpu().swiglu_forward(hidden_ref.gpu, gate, up);
  h.gpu().quantize_fp8(hidden_ref.gpu, ref.q, from);
  h.gpu().swiglu_forward_fp8(Mat(nullptr, DType::BF16, s.rows, s.ffn), gate, up, fused.q, from,
                             false);
  expect_same_fp8(fused, ref, "swiglu_forward_fp8 with no result buffer");
}

std::string shape_name(const ::testing::TestParamInfo<SwigluFp8Param>& info) {
  const auto& [s, from] = info.param;
  return std::to_string(s.rows) + "x" + std::to_string(s.ffn) + (s.pad != 0 ? "_padded_" : "_") +
         scale_label(from);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuSwigluFp8,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Values(Fp8ScaleFrom::History,
                                                              Fp8ScaleFrom::Kept,
                                                              Fp8ScaleFrom::Amax)),
                         shape_name);

}  // namespace
}  // namespace tinyllama::gpu_test
