// GemmEpilogue::Residual: the out- and down-projections add into the
// residual stream (Backend::gemm_add) and the forward norms only normalise.
// On the CPU backend the sum is the same fp32/fp64 addition the separate
// add (or the fused norm's add half) does, so every level must train to the
// same bits with the epilogue on; the cost model moves the add's bytes into
// the GEMMs and drops the residual ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/test_plans.h"
#include "prof/cost_model.h"
#include "trained_steps.h"

namespace tinyllama {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 31;
  c.hidden_dim = 24;
  c.num_layers = 3;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.ffn_dim = 40;
  return c;
}

TrainedSteps train_steps(const OpChoices& ops, Precision precision) {
  const ModelConfig cfg = small_config();
  const BatchShape shape{2, 7};
  return train_cpu_steps(cfg, shape, graph_plan(ops, precision, cfg, shape), 3, 5, 40);
}

TEST(GemmEpilogue, ResidualTrainsToTheSameBitsAsSeparateAdds) {
  for (const char* level : {"v1", "v2", "v3"}) {
    for (const Precision p : {Precision::fp32(), Precision::fp64()}) {
      OpChoices none = level_preset(level);
      none.epilogue = GemmEpilogue::None;
      OpChoices residual = none;
      residual.epilogue = GemmEpilogue::Residual;
      const TrainedSteps a = train_steps(none, p);
      const TrainedSteps b = train_steps(residual, p);
      const std::string what = std::string(level) + " " + precision_name(p);
      ASSERT_FALSE(a.losses.empty());
      EXPECT_EQ(a.losses, b.losses) << what;
      EXPECT_EQ(a.grads, b.grads) << what;
      EXPECT_EQ(a.params, b.params) << what;
    }
  }
}

TEST(GemmEpilogue, V4TrainsLikeV3OnTheCpu) {
  // On the CPU, v4's attention auto resolves to our flash (no cuDNN), so v4
  // differs from v3 by the epilogue alone.
  const TrainedSteps v3 = train_steps(level_preset("v3"), Precision::fp64());
  const TrainedSteps v4 = train_steps(level_preset("v4"), Precision::fp64());
  EXPECT_EQ(v3.losses, v4.losses);
  EXPECT_EQ(v3.params, v4.params);
}

std::vector<std::string> op_names(const OpChoices& ops) {
  const ModelConfig cfg = small_config();
  const BatchShape shape{2, 7};
  const prof::StepCost cost =
      prof::step_cost(cfg, shape, graph_plan(ops, Precision::amp(DType::BF16), cfg, shape));
  std::vector<std::string> names;
  for (const prof::OpCost& op : cost.ops) names.push_back(op.path);
  return names;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(GemmEpilogue, CostModelFoldsTheAddsIntoTheProjections) {
  OpChoices v3 = level_preset("v3");
  OpChoices v4ish = v3;
  v4ish.epilogue = GemmEpilogue::Residual;
  const std::vector<std::string> fused = op_names(v3);
  const std::vector<std::string> folded = op_names(v4ish);
  EXPECT_TRUE(has(fused, "forward/layer1/attn_residual_norm"));
  EXPECT_FALSE(has(folded, "forward/layer1/attn_residual_norm"));
  EXPECT_FALSE(has(folded, "forward/layer1/ffn_residual_norm"));
  EXPECT_TRUE(has(folded, "forward/layer1/attn_norm"));
  EXPECT_TRUE(has(folded, "forward/layer1/ffn_norm"));
  EXPECT_TRUE(has(folded, "forward/final_norm"));
  // Backward keeps the fused norm's residual gradient sums.
  EXPECT_TRUE(has(folded, "backward/layer1/attn_residual_norm"));
  // Each layer: two adds gone, two norms in their place; one norm more in all
  // (the final norm the last block's fused kernel wrote).
  EXPECT_EQ(folded.size(), fused.size());
}

}  // namespace
}  // namespace tinyllama
