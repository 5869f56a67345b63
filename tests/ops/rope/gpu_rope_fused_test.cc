// RopeImpl::Fused on the GPU: the flash backward kernels rotate dQ and dK by
// the inverse RoPE in their epilogues (the fp32 accumulators, before
// rounding). Each backward kernel family pinned in turn (mma.sync, wgmma,
// warp-specialised dK/dV; fp32's own kernels), with D in the dQ kernel or
// in a kernel of its own, against the float64 reference composed as the
// separate path computes it -- attention's backward, then rope_backward on
// dq and dk -- at shapes that stress the tiles and the positions: S = 1, S not a multiple of the
// tiles, GQA 1/2/3/4 (dK's sum over the group rotated once), head_dim 32/64/128, padded rows. Then
// whole v3 steps with --rope fused against the float64 reference and against --rope separate on the
// GPU.
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/errors.h"
#include "cpu/cpu_backend.h"
#include "cuda/gpu_model_util.h"
#include "cuda/gpu_test_util.h"
#include "model/model.h"
#include "ops/attention/cpu_attention.h"
#include "ops/attention/flash/flash_attention.h"
#include "ops/attention/flash_backward_pins.h"
#include "ops/rope/cpu_rope.h"
#include "train/step_runner.h"

namespace tinyllama::gpu_test {
namespace {

struct RopeCase {
  int batch, seq, heads, kv_heads, head_dim, pad;
};

const RopeCase kCases[] = {
    {2, 1, 4, 1, 64, 0},     // one position: no rotation at all (angle 0)
    {1, 7, 6, 2, 128, 8},    // a fraction of a tile, GQA 3, padded rows
    {3, 65, 4, 4, 64, 8},    // one past a 64-row tile, MHA
    {2, 200, 8, 2, 64, 0},   // a 72-row tail, GQA 4
    {1, 300, 4, 2, 128, 8},  // GQA 2, a tail of 44 rows
    {2, 97, 4, 2, 32, 0},    // head_dim 32 (the mma.sync / fp32 kernels only)
    {2, 97, 6, 2, 96, 8},    // head_dim 96 (likewise): GQA 3, padded rows
    {1, 1030, 2, 1, 64, 0},  // positions past 1000: angles of ~1e3 rad
};

using RopeParam = std::tuple<DType, BackwardPin, DeltaPin, RopeCase>;

class GpuFlashRopeBackward : public FlashBackwardPinTest<RopeParam> {};

TEST_P(GpuFlashRopeBackward, MatchesAttentionThenRopeBackward) {
  const auto [t, pin, delta, c] = GetParam();
  const std::string skip = backward_skip(t, pin);
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
  OpChoices ops = level_preset("v3");
  ops.rope = RopeImpl::Fused;
  const BatchShape shape{c.batch, c.seq};
  const StepPlan plan = test_plan(ops, precision_for(t), h.gpu(), cfg, shape, false,
                                  backward_pins(pin.kernel, delta.where));
  ASSERT_EQ(plan.ops.rope, RopeImpl::Fused) << "the plan kept the fused rotation";
  h.gpu().prepare(cfg, shape, plan);  // builds the (cos, sin) table

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
  // The reference: attention's backward, then the inverse rotation of the
  // q|k block, in float64.
  cpu::attention_backward(dq.cpu, dk.cpu, dv.cpu, dout.cpu, q.cpu, k.cpu, v.cpu, lse_saved.cpu,
                          Mat{}, s);
  cpu::rope(dqkv.cpu.col_block(0, qd + kvd), c.seq, c.head_dim, cfg.rope_theta, -1);

  h.gpu().attention_rope_backward(AttentionImpl::Flash, dq.gpu, dk.gpu, dv.gpu, dout.gpu, q.gpu,
                                  k.gpu, v.gpu, out_saved.gpu, lse_saved.gpu, Mat{}, s,
                                  cfg.rope_theta);
  const double tol = tolerance(t);
  const std::string what = std::string(pin.name) + " " + delta.name;
  h.expect_close(dv, tol, what + " dv (not rotated)");
  if (c.seq > 1) {  // at S = 1, dq and dk are rounding noise around zero
    h.expect_close(dq, tol, what + " dq rotated back");
    h.expect_close(dk, tol, what + " dk (summed over the group) rotated back");
  }
  EXPECT_TRUE(std::isfinite(h.rel_err(dqkv))) << "part of d_qkv was not written, or its padding";
}

std::string case_name(const ::testing::TestParamInfo<RopeParam>& info) {
  const auto& [t, pin, delta, c] = info.param;
  return dtype_label(t) + "_" + pin.name + "_" + delta.name + "_B" + std::to_string(c.batch) +
         "_S" + std::to_string(c.seq) + "_H" + std::to_string(c.heads) + "_K" +
         std::to_string(c.kv_heads) + "_hd" + std::to_string(c.head_dim) +
         (c.pad != 0 ? "_padded" : "");
}

INSTANTIATE_TEST_SUITE_P(Families, GpuFlashRopeBackward,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kBackwardPins),
                                            ::testing::ValuesIn(kDeltaPins),
                                            ::testing::ValuesIn(kCases)),
                         case_name);

// A fused run without the table prepare() builds says so instead of
// running unrotated.
TEST_F(GpuTest, FusedRopeWithoutItsTableIsRefused) {
  const DType t = DType::BF16;
  Harness h(t);
  ModelConfig cfg;
  cfg.num_heads = 2;
  cfg.num_kv_heads = 1;
  cfg.hidden_dim = 128;
  h.prepare(cfg, BatchShape{1, 16}, "v2");  // rope separate: no table
  const AttentionShape s{1, 16, 2, 1, 64};
  const Twin qkv = h.input(16, 256, t);
  const Twin d = h.output(16, 256, t);
  const Twin lse = h.output(2, 16, DType::F32);
  try {
    h.gpu().attention_rope_backward(AttentionImpl::Flash, col_block(d, 0, 128).gpu,
                                    col_block(d, 128, 64).gpu, col_block(d, 192, 64).gpu,
                                    col_block(qkv, 0, 128).gpu, col_block(qkv, 0, 128).gpu,
                                    col_block(qkv, 128, 64).gpu, col_block(qkv, 192, 64).gpu,
                                    col_block(qkv, 0, 128).gpu, lse.gpu, Mat{}, s, cfg.rope_theta);
    ADD_FAILURE() << "ran without a RoPE table";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("no RoPE table"), std::string::npos) << e.what();
  }
}

// Whole v3 steps of the small GQA model.
constexpr BatchShape kStepShape = kSmallStep;

class GpuRopeFusedStep : public GpuParamTest<DType> {};

// The gradients of one step with the rotation fused, against the float64
// CPU reference (rope separate) and against the GPU's separate rotation.
TEST_P(GpuRopeFusedStep, GradientsMatchTheReferenceAndTheSeparatePass) {
  const DType t = GetParam();
  const ModelConfig cfg = small_gqa_config();
  CpuBackend cpu_backend;
  Model ref(
      cfg, kStepShape,
      test_plan(eager_v3(RopeImpl::Separate), Precision::fp64(), cpu_backend, cfg, kStepShape),
      cpu_backend);
  const std::unique_ptr<Backend> fused_backend = make_cuda_backend(precision_for(t));
  const std::unique_ptr<Backend> sep_backend = make_cuda_backend(precision_for(t));
  const StepPlan fused_plan =
      test_plan(eager_v3(RopeImpl::Fused), precision_for(t), *fused_backend, cfg, kStepShape);
  ASSERT_EQ(fused_plan.ops.rope, RopeImpl::Fused);
  Model fused(cfg, kStepShape, fused_plan, *fused_backend);
  Model sep(
      cfg, kStepShape,
      test_plan(eager_v3(RopeImpl::Separate), precision_for(t), *sep_backend, cfg, kStepShape),
      *sep_backend);
  const std::vector<double> w = weights(ref.layout());
  const std::vector<std::int32_t> batch =
      random_rows(kStepShape.batch, kStepShape.seq, cfg.vocab_size, 17);
  step_each({&ref, &fused, &sep}, w, batch, t);
  // As gpu_model_test.cc: per-tensor relative 2-norm errors.
  const double tol = low_precision(t) ? 5e-2 : 1e-4;
  const auto [ref_err, ref_slot] = worst_slot(ref.layout(), fused.grads(), ref.grads());
  EXPECT_LE(ref_err, tol) << "fused vs float64 reference, worst gradient: " << ref_slot;
  const auto [sep_err, sep_slot] = worst_slot(ref.layout(), fused.grads(), sep.grads());
  EXPECT_LE(sep_err, tol) << "fused vs separate, worst gradient: " << sep_slot;
  EXPECT_GT(sep_err, 0.0) << "fp32 accumulators rounded once differ from twice, a little";
}

// Captured steps as the trainer runs them: the losses of five steps with
// the rotation fused track the separate pass's.
TEST_P(GpuRopeFusedStep, TrainsLikeTheSeparatePass) {
  const DType t = GetParam();
  const ModelConfig cfg = small_gqa_config();
  auto train = [&](RopeImpl rope) {
    const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
    OpChoices ops = level_preset("v3");
    ops.rope = rope;
    const StepPlan plan = test_plan(ops, precision_for(t), *backend, cfg, kStepShape);
    EXPECT_EQ(plan.ops.rope, rope);
    Model model(cfg, kStepShape, plan, *backend);
    model.set_params(weights(model.layout()));
    LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic, 1024.0, 2000);
    AdamWHyper hp;
    hp.lr = 1e-3f;
    StepRunner runner(model, scaler, hp);
    std::vector<double> losses;
    for (int i = 0; i < 5; ++i) {
      const std::vector<std::int32_t> rows = random_rows(
          kStepShape.batch, kStepShape.seq, cfg.vocab_size, 500 + static_cast<std::uint64_t>(i));
      while (!runner.can_launch()) losses.push_back(runner.finish().loss);
      runner.launch(rows);
    }
    while (runner.in_flight() > 0) losses.push_back(runner.finish().loss);
    return losses;
  };
  const std::vector<double> sep = train(RopeImpl::Separate);
  const std::vector<double> fused = train(RopeImpl::Fused);
  ASSERT_EQ(sep.size(), 5u);
  ASSERT_EQ(fused.size(), 5u);
  const double tol = low_precision(t) ? 1e-2 : 1e-5;
  for (std::size_t i = 0; i < sep.size(); ++i) {
    EXPECT_NEAR(fused[i], sep[i], tol * sep[i]) << "step " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuRopeFusedStep, ::testing::ValuesIn(gpu_dtypes()),
                         [](const auto& info) { return dtype_label(info.param); });

}  // namespace
}  // namespace tinyllama::gpu_test
