// RoPE (interleaved pairs, in place) against the float64 reference, on the
// q and k column blocks of a qkv buffer as the model calls it: the v columns
// must come through untouched. Sequence lengths that are not multiples of
// 32, several head dims, and the inverse rotation of the backward pass.
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/rope/cpu_rope.h"

namespace tinyllama::gpu_test {
namespace {

constexpr double kTheta = 10000.0;

// (dtype, seq, head_dim, row padding). Padding 8 keeps every row 16-byte
// aligned (the vectorised path); padding 2 leaves only pair alignment.
using RopeParam = std::tuple<DType, int, int, int>;

class GpuRope : public GpuParamTest<RopeParam> {};

TEST_P(GpuRope, ForwardAndBackwardOnQkBlocks) {
  const auto [t, seq, hd, pad] = GetParam();
  Harness h(t);
  const int batch = 2, heads = 4, kv_heads = 2;
  const std::int64_t tokens = static_cast<std::int64_t>(batch) * seq;
  const std::int64_t qk = static_cast<std::int64_t>(heads + kv_heads) * hd;
  const std::int64_t width = qk + static_cast<std::int64_t>(kv_heads) * hd;

  const Twin qkv = h.input(tokens, width, t, 1.0, pad);
  cpu::rope(col_block(qkv, 0, qk).cpu, seq, hd, kTheta, +1);
  h.gpu().rope_forward(col_block(qkv, 0, qk).gpu, seq, hd, kTheta);
  h.expect_close(qkv, tolerance(t), "rope_forward on the q|k block (v untouched)");

  const Twin dqkv = h.input(tokens, width, t, 1.0, pad);
  cpu::rope(col_block(dqkv, 0, qk).cpu, seq, hd, kTheta, -1);
  h.gpu().rope_backward(col_block(dqkv, 0, qk).gpu, seq, hd, kTheta);
  h.expect_close(dqkv, tolerance(t), "rope_backward on the q|k block (v untouched)");
}

std::string rope_name(const ::testing::TestParamInfo<RopeParam>& info) {
  const auto [t, seq, hd, pad] = info.param;
  return dtype_label(t) + "_S" + std::to_string(seq) + "_hd" + std::to_string(hd) + "_pad" +
         std::to_string(pad);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuRope,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values(1, 7, 33, 100),
                                            ::testing::Values(12, 32, 64, 128),
                                            ::testing::Values(2, 8)),
                         rope_name);

// Long sequences: angles of ~4000 rad must keep their accuracy (the kernel
// reduces them in double before the fp32 sincos).
TEST_F(GpuTest, RopeLongSequenceFloat32) {
  Harness h(DType::F32);
  const int seq = 4096, hd = 64;
  const Twin x = h.input(seq, 2 * hd, DType::F32);
  cpu::rope(x.cpu, seq, hd, kTheta, +1);
  h.gpu().rope_forward(x.gpu, seq, hd, kTheta);
  h.expect_close(x, tolerance(DType::F32), "rope_forward at positions up to 4095");
}

}  // namespace
}  // namespace tinyllama::gpu_test
