// Each of flash attention's kernel families pinned in turn against the
// float64 reference, in bf16 and fp16: the forward's (the Ampere-style
// mma.sync kernel; the Hopper wgmma kernels with one or two warpgroups, 64-
// or 128-key tiles, paired heads, the overlapped softmax; the
// warp-specialised TMA kernels) and the backward's (mma.sync, wgmma,
// warp-specialised dK/dV). Shapes that stress the tiling: S = 1, S not a
// multiple of the 64/128-row tiles, a query tile whose second warpgroup has
// no rows, GQA 1/2/3/4, head_dim 64 and 128, rows padded by 16 bytes
// (aligned, but ld != width). The backward's with D = rowsum(dO * O) in
// the dQ kernel and in a kernel of its own (FlashDelta), and the two
// bit-identical. The default families are covered by
// gpu_flash_attention_test.cc.
#include <cmath>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "flash_backward_pins.h"
#include "flash_forward_pins.h"
#include "ops/attention/cpu_attention.h"
#include "ops/attention/flash/flash_attention.h"

namespace tinyllama::gpu_test {
namespace {

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

using KernelParam = std::tuple<DType, ForwardPin, KernelCase>;

class GpuFlashForwardKernels : public FlashForwardPinTest<KernelParam> {};

TEST_P(GpuFlashForwardKernels, MatchTheReference) {
  const auto [t, pin, c] = GetParam();
  const std::string skip = forward_skip(t, pin);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const AttentionShape s{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  const std::int64_t tokens = static_cast<std::int64_t>(c.batch) * c.seq;
  const std::int64_t qd = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  Harness h(t);
  ModelConfig cfg;
  cfg.num_heads = c.heads;
  cfg.num_kv_heads = c.kv_heads;
  cfg.hidden_dim = c.heads * c.head_dim;
  h.prepare(cfg, BatchShape{c.batch, c.seq}, "v2", pin.pins());

  // Scale 1.5: scores of a few units, neither a flat nor a one-hot softmax.
  const Twin qkv = h.input(tokens, qd + 2 * kvd, t, 1.5, c.pad);
  const Twin q = col_block(qkv, 0, qd);
  const Twin k = col_block(qkv, qd, kvd);
  const Twin v = col_block(qkv, qd + kvd, kvd);
  const Twin out = h.output(tokens, qd, t, c.pad);
  const Twin lse = h.output(static_cast<std::int64_t>(c.batch) * c.heads, c.seq, DType::F32, 1);
  cpu::attention_forward(out.cpu, lse.cpu, Mat{}, q.cpu, k.cpu, v.cpu, s);
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
                                            ::testing::ValuesIn(kForwardPins),
                                            ::testing::ValuesIn(kCases)),
                         kernel_name);

// The backward's kernel families pinned in turn (mma.sync; wgmma; the
// warp-specialised dK/dV kernel; fp32's own kernels), each with D computed
// in the dQ kernel's prologue (the default) and by the separate delta
// kernel, from the reference's forward results rounded to the dtype the
// model saves. The forward's cases, and four more: head_dim 32 and 96
// (mma.sync and fp32 only) and rows 2 elements longer than their width (not
// 16-byte aligned: mma.sync with element loads, D summed a warp per row).
std::vector<KernelCase> backward_cases() {
  std::vector<KernelCase> cases(std::begin(kCases), std::end(kCases));
  cases.push_back({2, 97, 4, 2, 32, 0});  // head_dim 32, a 33-row tail, GQA 2
  cases.push_back({1, 70, 4, 2, 64, 2});  // unaligned rows
  cases.push_back({2, 97, 6, 2, 96, 0});  // head_dim 96: D on 16 lanes a row, 4 of them idle
  cases.push_back({1, 70, 4, 2, 96, 2});  // head_dim 96, unaligned rows
  return cases;
}

std::string case_label(const KernelCase& c) {
  return "_B" + std::to_string(c.batch) + "_S" + std::to_string(c.seq) + "_H" +
         std::to_string(c.heads) + "_K" + std::to_string(c.kv_heads) + "_hd" +
         std::to_string(c.head_dim) +
         (c.pad == 2   ? "_unaligned"
          : c.pad != 0 ? "_padded"
                       : "");
}

// The inputs and the float64 reference of one backward case.
struct BackwardRun {
  AttentionShape s;
  Twin q, k, v, out_saved, lse_saved, dout, dqkv, dq, dk, dv;

  // The backend is prepared with `pins` (the fused kernel's scratch is
  // planned with its dQ accumulator).
  BackwardRun(Harness& h, DType t, const KernelCase& c, const KernelPins& pins)
      : s{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim} {
    const std::int64_t tokens = static_cast<std::int64_t>(c.batch) * c.seq;
    const std::int64_t qd = static_cast<std::int64_t>(c.heads) * c.head_dim;
    const std::int64_t kvd = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
    ModelConfig cfg;
    cfg.num_heads = c.heads;
    cfg.num_kv_heads = c.kv_heads;
    cfg.hidden_dim = c.heads * c.head_dim;
    h.prepare(cfg, BatchShape{c.batch, c.seq}, "v2", pins);
    const Twin qkv = h.input(tokens, qd + 2 * kvd, t, 1.5, c.pad);
    q = col_block(qkv, 0, qd);
    k = col_block(qkv, qd, kvd);
    v = col_block(qkv, qd + kvd, kvd);
    const Twin out = h.output(tokens, qd, t, c.pad);
    const Twin lse = h.output(static_cast<std::int64_t>(c.batch) * c.heads, c.seq, DType::F32, 1);
    cpu::attention_forward(out.cpu, lse.cpu, Mat{}, q.cpu, k.cpu, v.cpu, s);
    out_saved = h.copy_of(out.cpu, t, c.pad);
    lse_saved = h.copy_of(lse.cpu, DType::F32, 1);
    dout = h.input(tokens, qd, t, 1.0, c.pad);
    dqkv = h.output(tokens, qd + 2 * kvd, t, c.pad);
    dq = col_block(dqkv, 0, qd);
    dk = col_block(dqkv, qd, kvd);
    dv = col_block(dqkv, qd + kvd, kvd);
    cpu::attention_backward(dq.cpu, dk.cpu, dv.cpu, dout.cpu, q.cpu, k.cpu, v.cpu, lse_saved.cpu,
                            Mat{}, s);
  }

  // The GPU backward into `grads` (d_qkv's layout) with the prepared plan's
  // kernels; from `other_dout` where given.
  void run_gpu(Harness& h, const Mat& grads, const Mat* other_dout = nullptr) const {
    const std::int64_t qd = q.gpu.cols;
    const std::int64_t kvd = k.gpu.cols;
    h.gpu().attention_backward(AttentionImpl::Flash, grads.col_block(0, qd),
                               grads.col_block(qd, kvd), grads.col_block(qd + kvd, kvd),
                               other_dout != nullptr ? *other_dout : dout.gpu, q.gpu, k.gpu, v.gpu,
                               out_saved.gpu, lse_saved.gpu, Mat{}, s);
  }
};

using BackwardParam = std::tuple<DType, BackwardPin, DeltaPin, KernelCase>;

class GpuFlashBackwardKernels : public FlashBackwardPinTest<BackwardParam> {};

TEST_P(GpuFlashBackwardKernels, MatchTheReference) {
  const auto [t, pin, delta, c] = GetParam();
  const std::string skip = backward_skip(t, pin);
  if (!skip.empty()) GTEST_SKIP() << skip;
  Harness h(t);
  const BackwardRun r(h, t, c, backward_pins(pin.kernel, delta.where));
  r.run_gpu(h, r.dqkv.gpu);
  const std::string what = std::string(pin.name) + " " + delta.name;
  h.expect_close(r.dv, tolerance(t), what + " dv (summed over the group)");
  if (c.seq > 1) {  // at S = 1, dq and dk are rounding noise around zero
    h.expect_close(r.dq, tolerance(t), what + " dq");
    h.expect_close(r.dk, tolerance(t), what + " dk (summed over the group)");
  }
  EXPECT_TRUE(std::isfinite(h.rel_err(r.dqkv))) << "part of d_qkv was not written, or its padding";
}

std::string backward_name(const ::testing::TestParamInfo<BackwardParam>& info) {
  const auto& [t, pin, delta, c] = info.param;
  return dtype_label(t) + "_" + pin.name + "_" + delta.name + case_label(c);
}

INSTANTIATE_TEST_SUITE_P(Families, GpuFlashBackwardKernels,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kBackwardPins),
                                            ::testing::ValuesIn(kDeltaPins),
                                            ::testing::ValuesIn(backward_cases())),
                         backward_name);

// D from the dQ kernels' prologue is the delta kernel's, bit for bit (the
// same sums in the same order, delta_rows.cuh): dQ, dK and dV are too.
using DeltaParam = std::tuple<DType, BackwardPin, KernelCase>;

class GpuFlashDeltaInDq : public FlashBackwardPinTest<DeltaParam> {};

TEST_P(GpuFlashDeltaInDq, GivesTheSeparateKernelsBits) {
  const auto [t, pin, c] = GetParam();
  const std::string skip = backward_skip(t, pin);
  if (!skip.empty()) GTEST_SKIP() << skip;
  Harness h(t);
  const BackwardRun r(h, t, c, backward_pins(pin.kernel));
  // The two placements called directly, with one scratch of their own, so
  // that D stays where the other placement wrote it.
  KernelChoices in_dq;
  in_dq.flash_backward = pin.kernel;
  KernelChoices separate_delta = in_dq;
  separate_delta.flash_delta = FlashDelta::Separate;
  const std::int64_t bytes = cuda::flash_attention_scratch_bytes(r.s, in_dq);
  const Twin scratch_block = h.output((bytes + 3) / 4, 1, DType::F32);
  const cuda::FlashScratch scratch =
      cuda::flash_attention_scratch(scratch_block.gpu.data, r.s, in_dq);
  auto run = [&](const KernelChoices& kernels, const Mat& grads, const Mat& dout) {
    const std::int64_t qd = r.q.gpu.cols, kvd = r.k.gpu.cols;
    cuda::flash_attention_backward(kernels, scratch, grads.col_block(0, qd),
                                   grads.col_block(qd, kvd), grads.col_block(qd + kvd, kvd), dout,
                                   r.q.gpu, r.k.gpu, r.v.gpu, r.out_saved.gpu, r.lse_saved.gpu, r.s,
                                   static_cast<cudaStream_t>(h.gpu().main_stream_handle()));
  };
  const Twin separate = h.output(r.dqkv.gpu.rows, r.dqkv.gpu.cols, t, c.pad);
  // First the scratch's D of another dO: a row the dQ kernels left
  // unwritten would keep that D and show below.
  const Twin other_dout = h.input(r.dout.gpu.rows, r.dout.gpu.cols, t, 1.0, c.pad);
  run(separate_delta, separate.gpu, other_dout.gpu);
  run(in_dq, r.dqkv.gpu, r.dout.gpu);
  run(separate_delta, separate.gpu, r.dout.gpu);
  const std::vector<double> a = h.device_values(separate.gpu);
  const std::vector<double> b = h.device_values(r.dqkv.gpu);
  ASSERT_EQ(a.size(), b.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i])) ++differing;  // NaN counts as different: unwritten
  }
  EXPECT_EQ(differing, 0u) << "of " << a.size() << " gradient elements";
  // And both are right, so the comparison is not between two wrong results.
  h.expect_close(r.dv, tolerance(t), std::string(pin.name) + " dv");
}

std::string delta_name(const ::testing::TestParamInfo<DeltaParam>& info) {
  const auto& [t, pin, c] = info.param;
  return dtype_label(t) + "_" + pin.name + case_label(c);
}

INSTANTIATE_TEST_SUITE_P(Families, GpuFlashDeltaInDq,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kBackwardPins),
                                            ::testing::ValuesIn(backward_cases())),
                         delta_name);

// The fused kernel sums dQ across its key blocks through global memory in a
// fixed order (dq_ordered.cuh), not with atomics: every run gives the same
// bits. Shapes with many key blocks per query tile, GQA and tails, each run
// three times.
class GpuFlashFusedBackward : public FlashBackwardPinTest<std::tuple<DType, KernelCase>> {};

TEST_P(GpuFlashFusedBackward, RepeatsToTheBit) {
  const auto [t, c] = GetParam();
  const BackwardPin fused{FlashBackwardKernel::Fused, "fused"};
  const std::string skip = backward_skip(t, fused);
  if (!skip.empty()) GTEST_SKIP() << skip;
  Harness h(t);
  const BackwardRun r(h, t, c, backward_pins(fused.kernel));  // plans its accumulator
  r.run_gpu(h, r.dqkv.gpu);
  const std::vector<double> first = h.device_values(r.dqkv.gpu);
  h.expect_close(r.dq, tolerance(t), "fused dq");
  h.expect_close(r.dk, tolerance(t), "fused dk");
  h.expect_close(r.dv, tolerance(t), "fused dv");
  for (int rep = 0; rep < 2; ++rep) {
    r.run_gpu(h, r.dqkv.gpu);
    const std::vector<double> again = h.device_values(r.dqkv.gpu);
    ASSERT_EQ(first.size(), again.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < first.size(); ++i) {
      if (!(first[i] == again[i])) ++differing;
    }
    EXPECT_EQ(differing, 0u) << "repeat " << rep + 1 << ": of " << first.size() << " elements";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuFlashFusedBackward,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16),
                                            ::testing::Values(KernelCase{2, 1000, 8, 2, 64, 0},
                                                              KernelCase{1, 777, 6, 2, 128, 8},
                                                              KernelCase{1, 2048, 4, 1, 64, 0})),
                         [](const ::testing::TestParamInfo<std::tuple<DType, KernelCase>>& info) {
                           return dtype_label(std::get<0>(info.param)) +
                                  case_label(std::get<1>(info.param));
                         });

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
  KernelPins pins;
  pins.flash_forward = FlashForwardKernel::Wgmma2x128;
  h.prepare(cfg, BatchShape{1, 70}, "v2", pins);
  const std::int64_t qd = 256, kvd = 128;
  const Twin qkv = h.input(70, qd + 2 * kvd, t, 1.5, /*pad=*/2);
  const Twin out = h.output(70, qd, t, 2);
  const Twin lse = h.output(4, 70, DType::F32);
  cpu::attention_forward(out.cpu, lse.cpu, Mat{}, col_block(qkv, 0, qd).cpu,
                         col_block(qkv, qd, kvd).cpu, col_block(qkv, qd + kvd, kvd).cpu, s);
  h.gpu().attention_forward(AttentionImpl::Flash, out.gpu, lse.gpu, Mat{},
                            col_block(qkv, 0, qd).gpu, col_block(qkv, qd, kvd).gpu,
                            col_block(qkv, qd + kvd, kvd).gpu, s);
  h.expect_close(out, tolerance(t), "out");
  h.expect_close(lse, tolerance(t), "lse");
}

}  // namespace
}  // namespace tinyllama::gpu_test
