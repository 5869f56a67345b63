// resolve_plan: the one place that decides each op's implementation, the
// execution, loss scaling and the workspaces, with a reason for every
// fallback.
#include "model/step_plan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "model/step_plan_json.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

DeviceCaps gpu_like_caps() {
  DeviceCaps caps = graph_capable_cpu_caps();
  caps.kind = DeviceKind::Cuda;
  caps.flash_head_dims = {32, 64, 128};
  caps.workspaces = [](const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) {
    std::vector<Workspace> w{{"gemm", 1000}};
    // Depends on the resolved plan, not the request: materialised attention
    // needs scores scratch.
    if (plan.ops.attention == AttentionImpl::Materialized) {
      w.push_back({"attention", shape.tokens() * shape.seq * cfg.num_heads});
    }
    return w;
  };
  return caps;
}

ModelConfig with_head_dim(int hd) {
  ModelConfig cfg;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.hidden_dim = 4 * hd;
  return cfg;
}

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
  // The workspaces are sized for what runs: the materialised scratch.
  EXPECT_EQ(plan.workspace_bytes(), 1000 + shape.tokens() * shape.seq * 4);

  const StepPlan ok =
      plan_for_level("v2", Precision::fp32(), gpu_like_caps(), with_head_dim(64), shape);
  EXPECT_EQ(ok.ops.attention, AttentionImpl::Flash);
  EXPECT_TRUE(ok.fallbacks.empty());
  EXPECT_EQ(ok.workspace_bytes(), 1000);
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
  EXPECT_EQ(plan.workspace_bytes(), 0);
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
    // qkv, gate_up, attention, swiglu, execution: one other each; optimizer: two.
    EXPECT_EQ(changes.size(), 7u) << level;
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
  EXPECT_EQ(j["workspaces"]["gemm"], 1000);
  EXPECT_EQ(j["workspace_bytes"], plan.workspace_bytes());
  ASSERT_EQ(j["fallbacks"].size(), 1u);
  EXPECT_EQ(j["fallbacks"][0]["using"], "materialized");
}

}  // namespace
}  // namespace tinyllama
