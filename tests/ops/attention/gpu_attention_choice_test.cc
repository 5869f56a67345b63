// attention=auto and attention=cudnn resolved on the real device: the plan
// times what can run at the model's shapes and keeps the faster; a build or
// precision without cuDNN falls back with a reason. The choice itself
// depends on the GPU, so the tests check that it is one of the timed
// pairings (flash, cudnn, cudnn+flash) and agrees with the times, never
// which one wins.
#include "cuda/gpu_test_util.h"
#include "ops/attention/cuda_attention_choice.h"
#include "train/backend_factory.h"

namespace tinyllama::gpu_test {
namespace {

ModelConfig attention_config(int head_dim) {
  ModelConfig cfg;
  cfg.vocab_size = 64;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.hidden_dim = 4 * head_dim;
  cfg.num_layers = 1;
  cfg.ffn_dim = 2 * cfg.hidden_dim;
  return cfg;
}

StepPlan plan_with(AttentionImpl attention, Precision precision, const ModelConfig& cfg,
                   BatchShape shape) {
  PlanRequest request;
  request.level = "custom";
  request.ops = level_preset("v2");
  request.ops.attention = attention;
  request.precision = precision;
  // What a run resolves on: the device's facts with cuDNN's answer and
  // auto's timings measured (train's run_caps).
  return plan_for_run(request, DeviceKind::Cuda, cfg, shape);
}

TEST_F(GpuTest, AutoTimesEveryCandidateAndKeepsTheFaster) {
  const ModelConfig cfg = attention_config(64);
  const BatchShape shape{2, 200};
  const StepPlan plan = plan_with(AttentionImpl::Auto, Precision::amp(DType::BF16), cfg, shape);
  const AttentionAuto& a = plan.attention_auto;
  ASSERT_TRUE(a.requested);
  EXPECT_TRUE(a.flash_timed);
  EXPECT_GT(a.flash.forward_ms, 0);
  EXPECT_GT(a.flash.backward_ms, 0);
  const std::string no_cudnn = cuda::cudnn_attention_support(cfg, shape, plan.precision);
  if (!no_cudnn.empty()) {
    EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
    ASSERT_EQ(a.notes.size(), 1u);
    EXPECT_EQ(a.notes[0], "cudnn: " + no_cudnn);
    GTEST_SKIP() << "cuDNN SDPA unavailable here: " << no_cudnn;
  }
  ASSERT_TRUE(a.cudnn_timed);
  EXPECT_GT(a.cudnn.forward_ms, 0);
  EXPECT_GT(a.cudnn.backward_ms, 0);
  // The fastest pairing: flash, cudnn, or cuDNN's forward with our backward.
  const double mixed = a.cudnn.forward_ms + a.flash.backward_ms;
  const AttentionImpl fastest = mixed < a.cudnn.total_ms() && mixed < a.flash.total_ms()
                                    ? AttentionImpl::CudnnFlash
                                : a.cudnn.total_ms() < a.flash.total_ms() ? AttentionImpl::Cudnn
                                                                          : AttentionImpl::Flash;
  EXPECT_EQ(plan.ops.attention, fastest) << a.describe(plan.ops.attention);
  // The backend prepares the chosen implementation's workspace.
  const std::unique_ptr<Backend> backend = make_cuda_backend(plan.precision);
  backend->prepare(cfg, shape, plan);
  EXPECT_EQ(backend->workspace_bytes(), plan.workspace_bytes());
}

TEST_F(GpuTest, CudnnInFp32FallsBackToFlashSayingWhy) {
  const ModelConfig cfg = attention_config(64);
  const StepPlan plan = plan_with(AttentionImpl::Cudnn, Precision::fp32(), cfg, {2, 64});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  EXPECT_EQ(plan.fallbacks[0].op, "attention");
  EXPECT_FALSE(plan.fallbacks[0].reason.empty());
}

}  // namespace
}  // namespace tinyllama::gpu_test
