// GradBuffers (model/step_plan.h): where the ring puts each gradient
// (GradLayout), the bytes the memory plan counts for it, and every reason
// resolve_plan keeps the full gradient instead.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "model/grad_layout.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

ModelConfig config_with_layers(int layers) {
  ModelConfig c;
  c.vocab_size = 13;
  c.hidden_dim = 8;
  c.num_layers = layers;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.ffn_dim = 10;  // odd-sized slots: padding between them
  return c;
}

OpChoices v2_ring() {
  OpChoices ops = level_preset("v2");
  ops.grad_buffers = GradBuffers::Ring;
  return ops;
}

TEST(GradLayout, FullIsTheParameterLayout) {
  const ParamLayout params(config_with_layers(4));
  const GradLayout grads(params, GradBuffers::Full);
  EXPECT_EQ(grads.total(), params.total());
  EXPECT_EQ(grads.ring_slots(), 0);
  for (const ParamSlot& s : params.slots()) EXPECT_EQ(grads.offset(s.offset), s.offset) << s.name;
  EXPECT_EQ(grads.slot_of_layer(3), 3);
}

TEST(GradLayout, RingKeepsTwoLayerSlotsBetweenTheEmbeddingAndTheFinalNorm) {
  const int layers = 5;
  const ParamLayout params(config_with_layers(layers));
  const GradLayout grads(params, GradBuffers::Ring);
  const ParamSpan emb = params.spans().front();
  const ParamSpan final_norm = params.spans().back();
  const std::int64_t layer = params.layer_span(0).size();
  ASSERT_GT(layer, 0);
  EXPECT_EQ(grads.ring_slots(), 2);
  EXPECT_EQ(grads.total(), emb.size() + 2 * layer + final_norm.size());
  EXPECT_EQ(params.total() - grads.total(), (layers - 2) * layer);

  // The embedding stays where it is; the final norm follows the two slots.
  EXPECT_EQ(grads.offset(params.embedding().offset), params.embedding().offset);
  EXPECT_EQ(grads.offset(params.final_norm().offset), emb.end + 2 * layer);
  for (int l = 0; l < layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_EQ(grads.slot_of_layer(l), l % 2);
    const std::int64_t slot_begin = emb.end + (l % 2) * layer;
    for (int LayerSlots::*which : {&LayerSlots::attn_norm, &LayerSlots::wqkv, &LayerSlots::wo,
                                   &LayerSlots::ffn_norm, &LayerSlots::wgu, &LayerSlots::wdown}) {
      const ParamSlot& s = params.layer(l, which);
      EXPECT_EQ(grads.offset(s.offset), slot_begin + (s.offset - params.layer_span(l).begin))
          << s.name;
    }
    const ParamSpan g = grads.span(params.layer_span(l));
    EXPECT_EQ(g.begin, slot_begin);
    EXPECT_EQ(g.size(), layer);
  }
  const ParamSpan g = grads.span(final_norm);
  EXPECT_EQ(g.end, grads.total());
  // Layers 1 and 2 take slots 1 and 0: no one span of the ring.
  EXPECT_THROW(grads.span({params.layer_span(1).begin, params.layer_span(2).end}),
               std::logic_error);
}

TEST(GradLayout, RingOfOneLayerHasOneSlot) {
  const ParamLayout params(config_with_layers(1));
  const GradLayout grads(params, GradBuffers::Ring);
  EXPECT_EQ(grads.ring_slots(), 1);
  EXPECT_EQ(grads.total(), params.total());
}

TEST(GradBuffersPlan, RingRunsWhereTheLayersAreSweptBesideTheBackwardPass) {
  const ModelConfig cfg = config_with_layers(4);
  const BatchShape shape{2, 5};
  for (const Precision p : {Precision::fp32(), Precision::amp(DType::BF16)}) {
    const StepPlan plan = graph_plan(v2_ring(), p, cfg, shape, true);
    EXPECT_EQ(plan.ops.grad_buffers, GradBuffers::Ring) << precision_name(p);
    EXPECT_TRUE(plan.fallbacks.empty()) << precision_name(p);
    EXPECT_NE(plan.describe().find("grad_buffers ring"), std::string::npos) << plan.describe();
  }
  // The ring is v3's and v4's choice; v1 and v2 keep the whole gradient.
  for (const std::string& level : implemented_levels()) {
    const bool ring = level == "v3" || level == "v4";
    EXPECT_EQ(level_preset(level).grad_buffers, ring ? GradBuffers::Ring : GradBuffers::Full)
        << level;
  }
}

// The optimizer's own fallback comes first, then the ring's, naming why.
void expect_ring_fell_back(const StepPlan& plan, const std::string& because) {
  EXPECT_EQ(plan.ops.grad_buffers, GradBuffers::Full);
  ASSERT_FALSE(plan.fallbacks.empty());
  const Fallback& f = plan.fallbacks.back();
  EXPECT_EQ(f.op, "grad_buffers");
  EXPECT_EQ(f.wanted, "ring");
  EXPECT_EQ(f.using_, "full");
  EXPECT_NE(f.reason.find(because), std::string::npos) << f.reason;
}

TEST(GradBuffersPlan, AnEagerStepKeepsTheFullGradient) {
  const ModelConfig cfg = config_with_layers(4);
  const StepPlan plan =
      plan_for_choices(v2_ring(), Precision::fp32(), DeviceCaps::cpu(), cfg, {2, 5});
  EXPECT_EQ(plan.ops.optimizer, OptimizerImpl::Fused);
  expect_ring_fell_back(plan, "this step's optimizer is fused");
}

TEST(GradBuffersPlan, PerTensorAndFusedOptimizersKeepTheFullGradient) {
  const ModelConfig cfg = config_with_layers(4);
  for (const OptimizerImpl opt : {OptimizerImpl::PerTensor, OptimizerImpl::Fused}) {
    OpChoices ops = v2_ring();
    ops.optimizer = opt;
    const StepPlan plan = graph_plan(ops, Precision::fp32(), cfg, {2, 5}, true);
    ASSERT_EQ(plan.fallbacks.size(), 1u) << impl_name(opt);
    expect_ring_fell_back(plan, std::string("this step's optimizer is ") + impl_name(opt));
  }
}

TEST(GradBuffersPlan, Fp16LossScalingKeepsTheFullGradient) {
  const ModelConfig cfg = config_with_layers(4);
  const StepPlan plan = graph_plan(v2_ring(), Precision::amp(DType::F16), cfg, {2, 5}, true);
  ASSERT_EQ(plan.fallbacks.size(), 2u);
  EXPECT_EQ(plan.fallbacks[0].op, "optimizer");
  expect_ring_fell_back(plan, "this step's optimizer is fused");
}

TEST(GradBuffersPlan, AReaderOfTheWholeGradientKeepsIt) {
  const ModelConfig cfg = config_with_layers(4);
  PlanRequest request;
  request.ops = v2_ring();
  request.whole_gradient_reader = "--dump-dir writes step 1's gradients";
  const StepPlan plan = resolve_plan(request, graph_capable_cpu_caps(), cfg, {2, 5});
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  expect_ring_fell_back(plan, "--dump-dir writes step 1's gradients");
  EXPECT_EQ(plan.ops.optimizer, OptimizerImpl::FusedPerLayer);
}

TEST(GradBuffersPlan, FallingBackLaterRecordsTheReasonOnce) {
  const ModelConfig cfg = config_with_layers(4);
  StepPlan plan = graph_plan(v2_ring(), Precision::fp32(), cfg, {2, 5}, true);
  fall_back_to_full_gradients(plan, "data parallel: exchanged over the flat block");
  expect_ring_fell_back(plan, "data parallel");
  fall_back_to_full_gradients(plan, "again");  // full already: nothing more
  EXPECT_EQ(plan.fallbacks.size(), 1u);
}

TEST(GradBuffersPlan, TheMemoryPlanCountsTheRingInsteadOfTheFullGradient) {
  const ModelConfig cfg = config_with_layers(6);
  const BatchShape shape{2, 5};
  const StepPlan full = graph_plan(level_preset("v2"), Precision::fp32(), cfg, shape);
  const StepPlan ring = graph_plan(v2_ring(), Precision::fp32(), cfg, shape, true);
  const MemoryBreakdown a = Model::estimate_memory(cfg, shape, full);
  const MemoryBreakdown b = Model::estimate_memory(cfg, shape, ring);
  const ParamLayout params(cfg);
  const std::int64_t layer_bytes = params.layer_span(0).size() * 4;
  EXPECT_EQ(a.gradients, params.total() * 4);
  EXPECT_EQ(a.gradients - b.gradients, 4 * layer_bytes);  // six layers in two slots
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.total() - b.total(), 4 * layer_bytes);
}

}  // namespace
}  // namespace tinyllama
