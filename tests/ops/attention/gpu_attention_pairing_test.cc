// attention cudnn+flash: cuDNN's forward, then our flash backward reading
// the out and lse cuDNN wrote (both keep the natural-log lse per query row
// in one [B*H, S] layout, so the backward recomputes P from it). Through
// the backend prepared for the pairing (cuDNN's workspace and the flash
// scratch share one block), against the float64 reference at awkward
// shapes: S off every tile size, GQA 1/2/3/4, head_dim 32/64/128; bf16 and
// fp16. Rows are packed as the model lays them out: the backend's cuDNN
// plans are for the model's layout (padded rows through cuDNN are
// gpu_cudnn_attention_test.cc's, through our backward gpu_flash_*'s). Then whole steps with the
// pairing and RoPE's backward rotation in our backward (rope fused) against the float64 reference
// and against flash alone.
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cuda/gpu_model_util.h"
#include "cuda/gpu_test_util.h"
#include "model/model.h"
#include "ops/attention/cpu_attention.h"
#include "ops/attention/cuda_attention_choice.h"

namespace tinyllama::gpu_test {
namespace {

struct PairCase {
  int batch, seq, heads, kv_heads, head_dim;
};

const PairCase kCases[] = {
    {1, 7, 4, 2, 64},     // a fraction of one tile, GQA 2
    {2, 33, 8, 2, 128},   // just past 32 rows, GQA 4, hd 128
    {3, 100, 6, 2, 32},   // GQA 3, hd 32
    {1, 129, 4, 4, 64},   // just past two 64-row tiles, no GQA
    {2, 257, 8, 4, 64},   // the workshop's heads, a 1-row last tile
    {2, 65, 4, 2, 64},    // one past a 64-row tile, GQA 2
    {1, 300, 6, 2, 128},  // GQA 3 at hd 128, a 44-row tail
};

ModelConfig config_of(const PairCase& c) {
  ModelConfig cfg;
  cfg.num_heads = c.heads;
  cfg.num_kv_heads = c.kv_heads;
  cfg.hidden_dim = c.heads * c.head_dim;
  return cfg;
}

OpChoices paired(const char* level) {
  OpChoices ops = level_preset(level);
  ops.attention = AttentionImpl::CudnnFlash;
  return ops;
}

using PairParam = std::tuple<DType, PairCase>;

class GpuCudnnFlashAttention : public GpuParamTest<PairParam> {};

TEST_P(GpuCudnnFlashAttention, CudnnForwardThenOurBackwardMatchTheReference) {
  const auto [t, c] = GetParam();
  const ModelConfig cfg = config_of(c);
  const BatchShape shape{c.batch, c.seq};
  const std::string no_cudnn = cuda::cudnn_attention_support(cfg, shape, precision_for(t));
  if (!no_cudnn.empty()) GTEST_SKIP() << "cuDNN SDPA unavailable here: " << no_cudnn;
  Harness h(t);
  const StepPlan plan = test_plan(paired("v2"), precision_for(t), h.gpu(), cfg, shape);
  ASSERT_EQ(plan.ops.attention, AttentionImpl::CudnnFlash) << "the plan kept the pairing";
  h.gpu().prepare(cfg, shape, plan);

  const AttentionShape s{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  const std::int64_t tokens = static_cast<std::int64_t>(c.batch) * c.seq;
  const std::int64_t qd = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  // Scale 1.5: scores of a few units, neither a flat nor a one-hot softmax.
  const Twin qkv = h.input(tokens, qd + 2 * kvd, t, 1.5);
  const Twin q = col_block(qkv, 0, qd);
  const Twin k = col_block(qkv, qd, kvd);
  const Twin v = col_block(qkv, qd + kvd, kvd);
  const Twin out = h.output(tokens, qd, t);
  const Twin lse = h.output(static_cast<std::int64_t>(c.batch) * c.heads, c.seq, DType::F32);
  cpu::attention_forward(out.cpu, lse.cpu, Mat{}, q.cpu, k.cpu, v.cpu, s);
  h.gpu().attention_forward(AttentionImpl::CudnnFlash, out.gpu, lse.gpu, Mat{}, q.gpu, k.gpu, v.gpu,
                            s);
  const double tol = tolerance(t);
  h.expect_close(out, tol, "cuDNN's out");
  h.expect_close(lse, tol, "cuDNN's lse");

  // Our backward reads what cuDNN saved; the reference its own forward's.
  const Twin dout = h.input(tokens, qd, t, 1.0);
  const Twin dqkv = h.output(tokens, qd + 2 * kvd, t);
  const Twin dq = col_block(dqkv, 0, qd);
  const Twin dk = col_block(dqkv, qd, kvd);
  const Twin dv = col_block(dqkv, qd + kvd, kvd);
  cpu::attention_backward(dq.cpu, dk.cpu, dv.cpu, dout.cpu, q.cpu, k.cpu, v.cpu, lse.cpu, Mat{}, s);
  h.gpu().attention_backward(AttentionImpl::CudnnFlash, dq.gpu, dk.gpu, dv.gpu, dout.gpu, q.gpu,
                             k.gpu, v.gpu, out.gpu, lse.gpu, Mat{}, s);
  h.expect_close(dq, tol, "flash dq from cuDNN's lse");
  h.expect_close(dk, tol, "flash dk (summed over the group)");
  h.expect_close(dv, tol, "flash dv (summed over the group)");
  EXPECT_TRUE(std::isfinite(h.rel_err(dqkv))) << "part of d_qkv was not written";
}

std::string case_name(const ::testing::TestParamInfo<PairParam>& info) {
  const auto& [t, c] = info.param;
  return dtype_label(t) + "_B" + std::to_string(c.batch) + "_S" + std::to_string(c.seq) + "_H" +
         std::to_string(c.heads) + "_K" + std::to_string(c.kv_heads) + "_hd" +
         std::to_string(c.head_dim);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuCudnnFlashAttention,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kCases)),
                         case_name);

// Whole steps of the small GQA model: v3's fusions with rope fused, which
// the pairing keeps (our backward rotates dq, dk).
constexpr BatchShape kStepShape = kSmallStep;

OpChoices step_ops(AttentionImpl attention) {
  OpChoices ops = eager_v3(RopeImpl::Fused);
  ops.attention = attention;
  return ops;
}

class GpuCudnnFlashStep : public GpuParamTest<DType> {};

TEST_P(GpuCudnnFlashStep, GradientsMatchTheReferenceAndFlashAlone) {
  const DType t = GetParam();
  const ModelConfig cfg = small_gqa_config();
  const std::string no_cudnn = cuda::cudnn_attention_support(cfg, kStepShape, precision_for(t));
  if (!no_cudnn.empty()) GTEST_SKIP() << "cuDNN SDPA unavailable here: " << no_cudnn;
  CpuBackend cpu_backend;
  OpChoices ref_ops = step_ops(AttentionImpl::Flash);
  ref_ops.rope = RopeImpl::Separate;
  Model ref(cfg, kStepShape, test_plan(ref_ops, Precision::fp64(), cpu_backend, cfg, kStepShape),
            cpu_backend);
  const std::unique_ptr<Backend> paired_backend = make_cuda_backend(precision_for(t));
  const std::unique_ptr<Backend> flash_backend = make_cuda_backend(precision_for(t));
  const StepPlan paired_plan = test_plan(step_ops(AttentionImpl::CudnnFlash), precision_for(t),
                                         *paired_backend, cfg, kStepShape);
  ASSERT_EQ(paired_plan.ops.attention, AttentionImpl::CudnnFlash);
  ASSERT_EQ(paired_plan.ops.rope, RopeImpl::Fused) << "our backward keeps the rotation";
  // Only cuDNN's forward workspace is planned, not its backward's dQ
  // accumulator.
  const StepPlan cudnn_plan =
      test_plan(step_ops(AttentionImpl::Cudnn), precision_for(t), *paired_backend, cfg, kStepShape);
  EXPECT_LT(paired_plan.workspace_bytes(), cudnn_plan.workspace_bytes());
  Model pair(cfg, kStepShape, paired_plan, *paired_backend);
  Model flash(
      cfg, kStepShape,
      test_plan(step_ops(AttentionImpl::Flash), precision_for(t), *flash_backend, cfg, kStepShape),
      *flash_backend);
  const std::vector<double> w = weights(ref.layout());
  const std::vector<std::int32_t> batch =
      random_rows(kStepShape.batch, kStepShape.seq, cfg.vocab_size, 29);
  step_each({&ref, &pair, &flash}, w, batch, t);
  // As gpu_model_test.cc: per-tensor relative 2-norm errors.
  const double tol = 5e-2;
  const auto [ref_err, ref_slot] = worst_slot(ref.layout(), pair.grads(), ref.grads());
  EXPECT_LE(ref_err, tol) << "cudnn+flash vs float64 reference, worst gradient: " << ref_slot;
  const auto [flash_err, flash_slot] = worst_slot(ref.layout(), pair.grads(), flash.grads());
  EXPECT_LE(flash_err, tol) << "cudnn+flash vs flash, worst gradient: " << flash_slot;
  EXPECT_GT(flash_err, 0.0) << "cuDNN's forward rounds differently from ours";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuCudnnFlashStep, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return dtype_label(info.param); });

}  // namespace
}  // namespace tinyllama::gpu_test
