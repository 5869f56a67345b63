// Each of flash attention's kernel families pinned in turn against the
// float64 reference, in bf16 and fp16: the forward's (the Ampere-style
// mma.sync kernel; the Hopper wgmma kernels with one or two warpgroups, 64-
// or 128-key tiles, paired heads, the overlapped softmax; the
// warp-specialised TMA kernels) and the backward's (mma.sync, wgmma,
// warp-specialised dK/dV). Shapes that stress the tiling: S = 1, S not a
// multiple of the 64/128-row tiles, a query tile whose second warpgroup has
// no rows, GQA 1/2/3/4, head_dim 64 and 128, rows padded by 16 bytes
// (aligned, but ld != width). The default families are covered by
// gpu_flash_attention_test.cc.
#include <cmath>
#include <string>
#include <tuple>

#include "cpu/cpu_ops.h"
#include "cuda/flash/flash_attention.h"
#include "gpu_test_util.h"

namespace tinyllama::gpu_test {
namespace {

using cuda::FlashForwardKernel;

struct KernelCase {
  int batch, seq, heads, kv_heads, head_dim, pad;
};

const KernelCase kCases[] = {
    {2, 1, 4, 1, 64, 0},     // one position
    {1, 7, 6, 2, 128, 8},    // a fraction of a tile, GQA 3
    {3, 65, 4, 4, 64, 8},    // one past a 64-row tile: the second warpgroup has 1 row
    {1, 127, 8, 2, 128, 0},  // one short of a 128-row tile
    {2, 200, 8, 2, 64, 0},   // a 72-row tail
    {1, 300, 4, 1, 128, 8},  // GQA 4, a tail of 44 rows
    {1, 1024, 2, 1, 64, 0},  // many key tiles: the online softmax rescales often
    {1, 513, 3, 3, 128, 0},  // MHA, one row past four 128-row tiles
};

struct Pin {
  FlashForwardKernel kernel;
  const char* name;
};
const Pin kPins[] = {{FlashForwardKernel::Mma, "mma"},
                     {FlashForwardKernel::Wgmma1x64, "wg1x64"},
                     {FlashForwardKernel::Wgmma1x128, "wg1x128"},
                     {FlashForwardKernel::Wgmma2x64, "wg2x64"},
                     {FlashForwardKernel::Wgmma2x128, "wg2x128"},
                     {FlashForwardKernel::Paired2x64, "pair2x64"},
                     {FlashForwardKernel::Paired2x128, "pair2x128"},
                     {FlashForwardKernel::Overlap1x64, "ov1x64"},
                     {FlashForwardKernel::Overlap2x64, "ov2x64"},
                     {FlashForwardKernel::Overlap2x128, "ov2x128"},
                     {FlashForwardKernel::Specialized64, "ws64"},
                     {FlashForwardKernel::Specialized128, "ws128"},
                     {FlashForwardKernel::PingPong64, "wspp64"},
                     {FlashForwardKernel::PingPong128, "wspp128"}};

using KernelParam = std::tuple<DType, Pin, KernelCase>;

class GpuFlashForwardKernels : public GpuParamTest<KernelParam> {
 protected:
  void TearDown() override { cuda::set_flash_forward_kernel(FlashForwardKernel::Best); }
};

TEST_P(GpuFlashForwardKernels, MatchTheReference) {
  const auto [t, pin, c] = GetParam();
  if (pin.kernel != FlashForwardKernel::Mma && !cuda::flash_hopper_kernels_available()) {
    GTEST_SKIP() << "the Hopper kernels need an sm_90 device and an sm_90a build";
  }
  const AttentionShape s{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  const std::int64_t tokens = static_cast<std::int64_t>(c.batch) * c.seq;
  const std::int64_t qd = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  Harness h(t);
  ModelConfig cfg;
  cfg.num_heads = c.heads;
  cfg.num_kv_heads = c.kv_heads;
  cfg.hidden_dim = c.heads * c.head_dim;
  h.prepare(cfg, BatchShape{c.batch, c.seq}, "v2");

  // Scale 1.5: scores of a few units, neither a flat nor a one-hot softmax.
  const Twin qkv = h.input(tokens, qd + 2 * kvd, t, 1.5, c.pad);
  const Twin q = col_block(qkv, 0, qd);
  const Twin k = col_block(qkv, qd, kvd);
  const Twin v = col_block(qkv, qd + kvd, kvd);
  const Twin out = h.output(tokens, qd, t, c.pad);
  const Twin lse = h.output(static_cast<std::int64_t>(c.batch) * c.heads, c.seq, DType::F32, 1);
  cpu::attention_forward(out.cpu, lse.cpu, Mat{}, q.cpu, k.cpu, v.cpu, s);
  cuda::set_flash_forward_kernel(pin.kernel);
  h.gpu().attention_forward(AttentionImpl::Flash, out.gpu, lse.gpu, Mat{}, q.gpu, k.gpu, v.gpu, s);
  h.expect_close(out, tolerance(t), std::string(pin.name) + " out (padding untouched)");
  h.expect_close(lse, tolerance(t), std::string(pin.name) + " lse (padding untouched)");
}

std::string kernel_name(const ::testing::TestParamInfo<KernelParam>& info) {
  const auto& [t, pin, c] = info.param;
  return dtype_label(t) + "_" + pin.name + "_B" + std::to_string(c.batch) + "_S" +
         std::to_string(c.seq) + "_H" + std::to_string(c.heads) + "_K" +
         std::to_string(c.kv_heads) + "_hd" + std::to_string(c.head_dim) +
         (c.pad != 0 ? "_padded" : "");
}

INSTANTIATE_TEST_SUITE_P(Families, GpuFlashForwardKernels,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kPins),
                                            ::testing::ValuesIn(kCases)),
                         kernel_name);

// The backward's kernel families pinned in turn (mma.sync; wgmma; the
// warp-specialised dK/dV kernel), from the reference's forward results
// rounded to the dtype the model saves.
struct BackwardPin {
  cuda::FlashBackwardKernel kernel;
  const char* name;
};
const BackwardPin kBackwardPins[] = {{cuda::FlashBackwardKernel::Mma, "mma"},
                                     {cuda::FlashBackwardKernel::Wgmma, "wgmma"},
                                     {cuda::FlashBackwardKernel::Specialized, "ws"}};

using BackwardParam = std::tuple<DType, BackwardPin, KernelCase>;

class GpuFlashBackwardKernels : public GpuParamTest<BackwardParam> {
 protected:
  void TearDown() override { cuda::set_flash_backward_kernel(cuda::FlashBackwardKernel::Best); }
};

TEST_P(GpuFlashBackwardKernels, MatchTheReference) {
  const auto [t, pin, c] = GetParam();
  if (pin.kernel != cuda::FlashBackwardKernel::Mma && !cuda::flash_hopper_kernels_available()) {
    GTEST_SKIP() << "the Hopper kernels need an sm_90 device and an sm_90a build";
  }
  const AttentionShape s{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  const std::int64_t tokens = static_cast<std::int64_t>(c.batch) * c.seq;
  const std::int64_t qd = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  Harness h(t);
  ModelConfig cfg;
  cfg.num_heads = c.heads;
  cfg.num_kv_heads = c.kv_heads;
  cfg.hidden_dim = c.heads * c.head_dim;
  h.prepare(cfg, BatchShape{c.batch, c.seq}, "v2");

  const Twin qkv = h.input(tokens, qd + 2 * kvd, t, 1.5, c.pad);
  const Twin q = col_block(qkv, 0, qd);
  const Twin k = col_block(qkv, qd, kvd);
  const Twin v = col_block(qkv, qd + kvd, kvd);
  const Twin out = h.output(tokens, qd, t, c.pad);
  const Twin lse = h.output(static_cast<std::int64_t>(c.batch) * c.heads, c.seq, DType::F32, 1);
  cpu::attention_forward(out.cpu, lse.cpu, Mat{}, q.cpu, k.cpu, v.cpu, s);
  const Twin out_saved = h.copy_of(out.cpu, t, c.pad);
  const Twin lse_saved = h.copy_of(lse.cpu, DType::F32, 1);
  const Twin dout = h.input(tokens, qd, t, 1.0, c.pad);
  const Twin dqkv = h.output(tokens, qd + 2 * kvd, t, c.pad);
  const Twin dq = col_block(dqkv, 0, qd);
  const Twin dk = col_block(dqkv, qd, kvd);
  const Twin dv = col_block(dqkv, qd + kvd, kvd);
  cpu::attention_backward(dq.cpu, dk.cpu, dv.cpu, dout.cpu, q.cpu, k.cpu, v.cpu, lse_saved.cpu,
                          Mat{}, s);
  cuda::set_flash_backward_kernel(pin.kernel);
  h.gpu().attention_backward(AttentionImpl::Flash, dq.gpu, dk.gpu, dv.gpu, dout.gpu, q.gpu, k.gpu,
                             v.gpu, out_saved.gpu, lse_saved.gpu, Mat{}, s);
  h.expect_close(dv, tolerance(t), std::string(pin.name) + " dv (summed over the group)");
  if (c.seq > 1) {  // at S = 1, dq and dk are rounding noise around zero
    h.expect_close(dq, tolerance(t), std::string(pin.name) + " dq");
    h.expect_close(dk, tolerance(t), std::string(pin.name) + " dk (summed over the group)");
  }
  EXPECT_TRUE(std::isfinite(h.rel_err(dqkv))) << "part of d_qkv was not written, or its padding";
}

std::string backward_name(const ::testing::TestParamInfo<BackwardParam>& info) {
  const auto& [t, pin, c] = info.param;
  return dtype_label(t) + "_" + pin.name + "_B" + std::to_string(c.batch) + "_S" +
         std::to_string(c.seq) + "_H" + std::to_string(c.heads) + "_K" +
         std::to_string(c.kv_heads) + "_hd" + std::to_string(c.head_dim) +
         (c.pad != 0 ? "_padded" : "");
}

INSTANTIATE_TEST_SUITE_P(Families, GpuFlashBackwardKernels,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kBackwardPins),
                                            ::testing::ValuesIn(kCases)),
                         backward_name);

// Where a pinned Hopper kernel cannot run (rows not 16-byte aligned), the
// Ampere-style kernel takes over and the result is still right.
TEST_F(GpuTest, PinnedHopperForwardFallsBackOnUnalignedRows) {
  const AttentionShape s{1, 70, 4, 2, 64};
  const DType t = DType::BF16;
  Harness h(t);
  ModelConfig cfg;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.hidden_dim = 256;
  h.prepare(cfg, BatchShape{1, 70}, "v2");
  const std::int64_t qd = 256, kvd = 128;
  const Twin qkv = h.input(70, qd + 2 * kvd, t, 1.5, /*pad=*/2);
  const Twin out = h.output(70, qd, t, 2);
  const Twin lse = h.output(4, 70, DType::F32);
  cpu::attention_forward(out.cpu, lse.cpu, Mat{}, col_block(qkv, 0, qd).cpu,
                         col_block(qkv, qd, kvd).cpu, col_block(qkv, qd + kvd, kvd).cpu, s);
  cuda::set_flash_forward_kernel(FlashForwardKernel::Wgmma2x128);
  h.gpu().attention_forward(AttentionImpl::Flash, out.gpu, lse.gpu, Mat{},
                            col_block(qkv, 0, qd).gpu, col_block(qkv, qd, kvd).gpu,
                            col_block(qkv, qd + kvd, kvd).gpu, s);
  cuda::set_flash_forward_kernel(FlashForwardKernel::Best);
  h.expect_close(out, tolerance(t), "out");
  h.expect_close(lse, tolerance(t), "lse");
}

}  // namespace
}  // namespace tinyllama::gpu_test
