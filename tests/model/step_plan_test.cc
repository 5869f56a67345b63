// resolve_plan: the one place that decides each op's implementation, the
// execution, loss scaling and the kernel families, from the device's facts,
// with a reason for every fallback.
#include "model/step_plan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "model/step_plan_json.h"
#include "model/test_plans.h"
#include "plan_test_caps.h"

namespace tinyllama {
namespace {

TEST(StepPlan, AHeadDimWithoutFlashKernelsFallsBackToMaterialisedWithAReason) {
  const BatchShape shape{2, 16};
  const StepPlan plan =
      plan_for_level("v2", Precision::fp32(), gpu_like_caps(), with_head_dim(96), shape);
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Materialized);
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  EXPECT_EQ(plan.fallbacks[0].op, "attention");
  EXPECT_EQ(plan.fallbacks[0].wanted, "flash");
  EXPECT_EQ(plan.fallbacks[0].using_, "materialized");
  EXPECT_NE(plan.fallbacks[0].reason.find("head_dim 32, 64, 128 (this model: 96)"),
            std::string::npos)
      << plan.fallbacks[0].reason;

  const StepPlan ok =
      plan_for_level("v2", Precision::fp32(), gpu_like_caps(), with_head_dim(64), shape);
  EXPECT_EQ(ok.ops.attention, AttentionImpl::Flash);
  EXPECT_TRUE(ok.fallbacks.empty());
  EXPECT_TRUE(ok.captured());
  EXPECT_TRUE(ok.parallel_branches);
  EXPECT_TRUE(ok.updates_layers_in_backward());
}

TEST(StepPlan, TheCpuRunsEagerlyAndOneSweepWithReasons) {
  const StepPlan plan =
      plan_for_level("v2", Precision::fp32(), DeviceCaps::cpu(), with_head_dim(96), {2, 8});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash) << "the cpu reference has any head_dim";
  EXPECT_EQ(plan.ops.execution, Execution::Eager);
  EXPECT_EQ(plan.ops.optimizer, OptimizerImpl::Fused);
  EXPECT_FALSE(plan.parallel_branches);
  ASSERT_EQ(plan.fallbacks.size(), 2u);
  EXPECT_EQ(plan.fallbacks[0].describe(), "execution graph -> eager: the cpu backend runs eagerly");
  EXPECT_EQ(plan.fallbacks[1].op, "optimizer");
  EXPECT_NE(plan.fallbacks[1].reason.find("runs eagerly"), std::string::npos);
  EXPECT_TRUE(plan.workspaces.empty()) << "resolve_plan leaves them to the backend";
}

TEST(StepPlan, Fp16ScalesTheLossAndKeepsOneSweepAfterTheScan) {
  const StepPlan plan =
      plan_for_level("v2", Precision::amp(DType::F16), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(plan.loss_scaling, LossScaling::Dynamic);
  EXPECT_EQ(plan.ops.optimizer, OptimizerImpl::Fused);
  EXPECT_TRUE(plan.parallel_branches) << "the weight-gradient branch stays";
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  EXPECT_NE(plan.fallbacks[0].reason.find("overflow scan"), std::string::npos);

  const StepPlan bf16 =
      plan_for_level("v2", Precision::amp(DType::BF16), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(bf16.loss_scaling, LossScaling::None);
  EXPECT_EQ(bf16.ops.optimizer, OptimizerImpl::FusedPerLayer);
}

TEST(StepPlan, SingleChangesChangeExactlyOneChoiceEach) {
  for (const std::string& level : implemented_levels()) {
    const OpChoices preset = level_preset(level);
    const std::vector<OpChoices> changes = single_changes(preset);
    // qkv, gate_up, norm, rope, embedding_grad, loss, gemm_epilogue,
    // execution: one other each; swiglu, optimizer and activations: two; attention:
    // two other implementations, or all three under v4's auto (a way to
    // choose, not an implementation).
    // Under v3's and v4's activations auto, all three are changes too, and
    // under v4's kernel_launch auto both plain and pdl (else the other one).
    const std::size_t attention = preset.attention == AttentionImpl::Auto ? 3 : 2;
    const std::size_t activations = preset.activations == ActivationsImpl::Auto ? 3 : 2;
    const std::size_t launch = preset.kernel_launch == KernelLaunch::Auto ? 2 : 1;
    EXPECT_EQ(changes.size(), 12u + attention + activations + launch) << level;
    for (const OpChoices& c : changes) {
      int differing = 0;
      const auto a = named_choices(preset);
      const auto b = named_choices(c);
      for (std::size_t i = 0; i < a.size(); ++i) {
        differing += std::string(a[i].impl) != b[i].impl ? 1 : 0;
      }
      EXPECT_EQ(differing, 1) << level << ": " << named_summary(c);
    }
  }
  // Both presets, then their single changes without repeats.
  std::set<std::string> names;
  for (const PlanVariant& v : level_variants()) EXPECT_TRUE(names.insert(v.name).second) << v.name;
  EXPECT_GE(level_variants().size(), 12u);
}

// v4 launches its kernels programmatically where the device can, under
// mixed precision (auto); v1-v3 stay plain.
TEST(StepPlan, KernelLaunchIsPdlAtV4OnlyAndFallsBackWithAReason) {
  for (const char* level : {"v1", "v2", "v3"}) {
    EXPECT_EQ(level_preset(level).kernel_launch, KernelLaunch::Plain) << level;
  }
  EXPECT_EQ(level_preset("v4").kernel_launch, KernelLaunch::Auto);
  const StepPlan amp =
      plan_for_level("v4", Precision::amp(DType::BF16), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(amp.ops.kernel_launch, KernelLaunch::Pdl);
  EXPECT_EQ(amp.kernel_launch_auto, "auto chose pdl: mixed precision");
  EXPECT_NE(amp.describe().find("kernel_launch pdl"), std::string::npos) << amp.describe();
  EXPECT_EQ(plan_json(amp)["kernel_launch_auto"], "auto chose pdl: mixed precision");
  const StepPlan full =
      plan_for_level("v4", Precision::fp32(), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(full.ops.kernel_launch, KernelLaunch::Plain);
  EXPECT_EQ(full.kernel_launch_auto, "auto chose plain: full precision (fp32 ran slower with pdl)");
  for (const Fallback& f : full.fallbacks) EXPECT_NE(f.op, "kernel_launch") << f.describe();

  OpChoices pdl = level_preset("v2");
  pdl.kernel_launch = KernelLaunch::Pdl;
  const StepPlan gpu =
      plan_for_choices(pdl, Precision::fp32(), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(gpu.ops.kernel_launch, KernelLaunch::Pdl);
  EXPECT_TRUE(gpu.fallbacks.empty());
  EXPECT_NE(gpu.describe().find("kernel_launch pdl"), std::string::npos) << gpu.describe();
  EXPECT_EQ(plan_json(gpu)["ops"]["kernel_launch"], "pdl");

  // The CPU backend launches no kernels; an older GPU has no PDL.
  const StepPlan cpu =
      plan_for_choices(pdl, Precision::fp32(), DeviceCaps::cpu(), with_head_dim(64), {2, 8});
  EXPECT_EQ(cpu.ops.kernel_launch, KernelLaunch::Plain);
  ASSERT_FALSE(cpu.fallbacks.empty());
  EXPECT_EQ(cpu.fallbacks.back().describe(),
            "kernel_launch pdl -> plain: the cpu backend launches no kernels");
  EXPECT_NE(cpu.describe().find("kernel_launch plain"), std::string::npos) << cpu.describe();
  EXPECT_EQ(plan_json(cpu)["fallbacks"].back()["op"], "kernel_launch");

  DeviceCaps ampere = gpu_like_caps();
  ampere.no_programmatic_launch =
      "programmatic dependent launch needs sm_90 or newer (this device: sm_80)";
  const StepPlan old =
      plan_for_level("v4", Precision::amp(DType::BF16), ampere, with_head_dim(64), {2, 8});
  EXPECT_EQ(old.ops.kernel_launch, KernelLaunch::Plain);
  bool said = false;
  for (const Fallback& f : old.fallbacks) {
    if (f.op == "kernel_launch") said = f.reason == ampere.no_programmatic_launch;
  }
  EXPECT_TRUE(said) << "the device's reason is the fallback's";
}

TEST(StepPlan, JsonNamesEveryOpAndFallback) {
  const StepPlan plan =
      plan_for_level("v2", Precision::fp32(), gpu_like_caps(), with_head_dim(96), {2, 16});
  const nlohmann::json j = plan_json(plan);
  EXPECT_EQ(j["level"], "v2");
  EXPECT_EQ(j["device"], "cuda");
  EXPECT_EQ(j["ops"].size(), named_choices(plan.ops).size());
  EXPECT_EQ(j["ops"]["attention"], "materialized");
  EXPECT_EQ(j["ops"]["optimizer"], "fused_per_layer");
  EXPECT_EQ(j["loss_scaling"], "none");
  EXPECT_EQ(j["workspace_bytes"], plan.workspace_bytes());
  EXPECT_EQ(j["kernels"]["flash_forward"], "mma") << "no Hopper kernels in these facts";
  EXPECT_EQ(j["kernels"]["loss_rows"], "auto");
  EXPECT_EQ(j["kernels"].size(), 8u);
  ASSERT_EQ(j["fallbacks"].size(), 1u);
  EXPECT_EQ(j["fallbacks"][0]["using"], "materialized");
}

}  // namespace
}  // namespace tinyllama

namespace tinyllama {
namespace {

// v3's activations auto: recompute where hidden >= 2048 and tokens x
// hidden >= 2^22, the norms alone elsewhere from tokens x hidden >= 2^20,
// stored below; the plan says which and why, in the header line and the
// JSON.
TEST(StepPlan, ActivationsAutoRecomputesBySize) {
  ModelConfig narrow = with_head_dim(64);
  narrow.hidden_dim = 512;
  narrow.num_heads = 8;
  narrow.num_kv_heads = 4;
  const Precision bf16 = Precision::amp(DType::BF16);
  const StepPlan big_narrow = plan_for_level("v3", bf16, gpu_like_caps(), narrow, {32, 1024});
  EXPECT_EQ(big_narrow.ops.activations, ActivationsImpl::RecomputeNorms);
  EXPECT_EQ(big_narrow.activations_auto,
            "auto chose recompute_norms: hidden 512 < 2048, 32768 tokens x hidden >= 4194304");
  // 2048 tokens x 512 = 2^20 exactly: inclusive.
  const StepPlan mid_narrow = plan_for_level("v3", bf16, gpu_like_caps(), narrow, {16, 128});
  EXPECT_EQ(mid_narrow.ops.activations, ActivationsImpl::RecomputeNorms);
  EXPECT_EQ(mid_narrow.activations_auto,
            "auto chose recompute_norms: hidden 512 < 2048, 2048 tokens x hidden < 4194304, >= "
            "1048576");
  // The workshop step, B8 S128: launch-bound, its norms kept.
  const StepPlan workshop = plan_for_level("v3", bf16, gpu_like_caps(), narrow, {8, 128});
  EXPECT_EQ(workshop.ops.activations, ActivationsImpl::Stored);
  EXPECT_EQ(workshop.activations_auto,
            "auto chose stored: hidden 512 < 2048, 1024 tokens x hidden < 1048576");
  ModelConfig wide = with_head_dim(64);
  wide.hidden_dim = 2048;
  wide.num_heads = 32;
  wide.num_kv_heads = 16;
  // 2048 tokens x 2048 = 2^22 exactly: both thresholds are inclusive.
  const StepPlan large = plan_for_level("v3", bf16, gpu_like_caps(), wide, {2, 1024});
  EXPECT_EQ(large.ops.activations, ActivationsImpl::RecomputeNormsSwiglu);
  EXPECT_EQ(large.activations_auto,
            "auto chose recompute: hidden 2048 >= 2048, 2048 tokens x hidden >= 4194304");
  EXPECT_EQ(plan_json(large)["activations_auto"], large.activations_auto);
  const StepPlan small = plan_for_level("v3", bf16, gpu_like_caps(), wide, {1, 128});
  EXPECT_EQ(small.ops.activations, ActivationsImpl::Stored);
  // An explicit choice is kept and says nothing.
  const StepPlan v2 = plan_for_level("v2", bf16, gpu_like_caps(), wide, {2, 1024});
  EXPECT_EQ(v2.ops.activations, ActivationsImpl::Stored);
  EXPECT_TRUE(v2.activations_auto.empty());
}

// An fp32 step recomputes the norms and the SwiGLU output from 2^19 tokens x
// hidden at any hidden size (its GEMMs are on the CUDA cores), and keeps
// them below.
TEST(StepPlan, ActivationsAutoRecomputesFp32FromHalfTheSize) {
  ModelConfig narrow = with_head_dim(64);
  narrow.hidden_dim = 512;
  narrow.num_heads = 8;
  narrow.num_kv_heads = 4;
  // The workshop step, B8 S128: 1024 x 512 = 2^19 exactly, inclusive.
  const StepPlan workshop =
      plan_for_level("v4", Precision::fp32(), gpu_like_caps(), narrow, {8, 128});
  EXPECT_EQ(workshop.ops.activations, ActivationsImpl::RecomputeNormsSwiglu);
  EXPECT_EQ(workshop.activations_auto,
            "auto chose recompute: fp32 step, 1024 tokens x hidden >= 524288");
  const StepPlan smaller =
      plan_for_level("v4", Precision::fp32(), gpu_like_caps(), narrow, {8, 64});
  EXPECT_EQ(smaller.ops.activations, ActivationsImpl::Stored);
  EXPECT_EQ(smaller.activations_auto, "auto chose stored: fp32 step, 512 tokens x hidden < 524288");
  // The same workshop step in bf16 keeps its activations.
  const StepPlan bf16 =
      plan_for_level("v4", Precision::amp(DType::BF16), gpu_like_caps(), narrow, {8, 128});
  EXPECT_EQ(bf16.ops.activations, ActivationsImpl::Stored);
}

}  // namespace
}  // namespace tinyllama
