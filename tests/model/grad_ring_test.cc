// GradBuffers::Ring against Full: whole training steps (the layers swept
// beside the backward pass) give bit-identical weights and AdamW moments,
// at every level's choices, with the side work run in order or at the
// latest moment the Backend contract allows (tests/model/late_side_gemms.h):
// a layer two below that wrote its gradient slot before the sweep of the
// layer above had read it would change the weights. The CUDA side, in a
// captured graph with branches, is tests/cuda/gpu_grad_ring_test.cc.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/late_side_gemms.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "random_batch.h"
#include "same_bits.h"
#include "whole_step.h"

namespace tinyllama {
namespace {

ModelConfig four_layers() {
  ModelConfig c;
  c.vocab_size = 17;
  c.hidden_dim = 16;
  c.num_layers = 4;  // each ring slot taken twice per step
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 20;
  return c;
}

struct State {
  std::vector<double> params, m, v;
};

OpChoices with_buffers(OpChoices ops, GradBuffers buffers) {
  ops.grad_buffers = buffers;
  return ops;
}

// Three whole steps as StepRunner runs them; the state after each.
std::vector<State> train(Backend& backend, const OpChoices& ops, Precision precision) {
  const ModelConfig cfg = four_layers();
  const BatchShape shape{2, 6};
  const StepPlan plan = graph_plan(ops, precision, cfg, shape, /*keep_grad_ring=*/true);
  EXPECT_EQ(plan.ops.grad_buffers, ops.grad_buffers) << "fell back: " << plan.describe();
  Model model(cfg, shape, plan, backend);
  model.set_params(initial_weights(model.layout(), 5));
  AdamWHyper hp;
  hp.lr = 1e-2f;  // large enough that every step visibly moves the weights
  std::vector<State> out;
  for (int step = 1; step <= 3; ++step) {
    model.set_batch(random_rows(shape.batch, shape.seq, cfg.vocab_size, 60 + step));
    hp.step = step;
    run_whole_step(model, hp);
    out.push_back({model.params(), model.adam_m(), model.adam_v()});
  }
  return out;
}

void expect_same_states(const std::vector<State>& expected, const std::vector<State>& got) {
  ASSERT_EQ(expected.size(), got.size());
  for (std::size_t s = 0; s < got.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    EXPECT_TRUE(same_bits(expected[s].params, got[s].params)) << "weights differ";
    EXPECT_TRUE(same_bits(expected[s].m, got[s].m)) << "first moments differ";
    EXPECT_TRUE(same_bits(expected[s].v, got[s].v)) << "second moments differ";
  }
  // Not vacuous: the steps moved the weights.
  EXPECT_FALSE(same_bits(got.front().params, got.back().params));
}

struct Variant {
  std::string name;
  OpChoices ops;
};

// v2 and v3 as they are, and the unfused projections (several weight-
// gradient GEMMs into row slices of one slot) and the recomputed norms
// under the per-layer sweeps.
std::vector<Variant> variants() {
  OpChoices split = level_preset("v1");
  split.optimizer = OptimizerImpl::FusedPerLayer;
  split.execution = Execution::Graph;
  OpChoices recompute = level_preset("v3");
  recompute.activations = ActivationsImpl::RecomputeNorms;
  return {{"v2", level_preset("v2")},
          {"v3", level_preset("v3")},
          {"v1_with_per_layer_sweeps", split},
          {"v3_recompute_norms", recompute}};
}

class GradRing : public ::testing::TestWithParam<int> {
 protected:
  const Variant& variant() const { return variants_[static_cast<std::size_t>(GetParam())]; }
  std::vector<Variant> variants_ = variants();
};

TEST_P(GradRing, GivesTheWeightsOfTheFullGradientBitForBit) {
  for (const Precision p : {Precision::fp64(), Precision::fp32()}) {
    SCOPED_TRACE(precision_name(p));
    CpuBackend full_backend;
    const std::vector<State> full =
        train(full_backend, with_buffers(variant().ops, GradBuffers::Full), p);
    CpuBackend ring_backend;
    expect_same_states(full,
                       train(ring_backend, with_buffers(variant().ops, GradBuffers::Ring), p));
  }
}

TEST_P(GradRing, SideWorkAtTheLatestAndEarliestMomentGivesTheSameWeights) {
  CpuBackend in_order;
  const std::vector<State> full =
      train(in_order, with_buffers(variant().ops, GradBuffers::Full), Precision::fp64());
  for (const bool late_updates : {true, false}) {
    SCOPED_TRACE(late_updates ? "latest updates" : "earliest updates");
    LateSideGemms late(late_updates);
    expect_same_states(
        full, train(late, with_buffers(variant().ops, GradBuffers::Ring), Precision::fp64()));
    EXPECT_EQ(late.pending(), 0u);
    EXPECT_EQ(late.pending_updates(), 0u);
    EXPECT_EQ(late.deferred_updates(), 3 * four_layers().num_layers);
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, GradRing, ::testing::Range(0, static_cast<int>(variants().size())),
                         [](const auto& info) {
                           return variants()[static_cast<std::size_t>(info.param)].name;
                         });

// The same deferred backend with the ring's join ignored: the sweeps then
// run after the layers two below overwrote their slots, and the weights
// differ. Shows that the test above can fail, and that the join is what
// orders the slot's reuse.
class RingJoinIgnored final : public LateSideGemms {
 public:
  void join_side_update(std::int64_t /*ticket*/) override {}
};

TEST(GradRingJoin, WithoutItTheSweepsReadTheWrongLayersGradients) {
  CpuBackend in_order;
  const std::vector<State> full =
      train(in_order, with_buffers(level_preset("v2"), GradBuffers::Full), Precision::fp64());
  RingJoinIgnored broken;
  const std::vector<State> got =
      train(broken, with_buffers(level_preset("v2"), GradBuffers::Ring), Precision::fp64());
  EXPECT_FALSE(same_bits(full.front().params, got.front().params));
}

TEST(GradRingModel, RefusesToReadOrFillAWholeGradientItDoesNotKeep) {
  const ModelConfig cfg = four_layers();
  const BatchShape shape{2, 6};
  CpuBackend backend;
  Model model(cfg, shape,
              graph_plan(with_buffers(level_preset("v2"), GradBuffers::Ring), Precision::fp64(),
                         cfg, shape, /*keep_grad_ring=*/true),
              backend);
  model.set_params(initial_weights(model.layout(), 5));
  model.set_batch(random_rows(shape.batch, shape.seq, cfg.vocab_size, 61));
  model.forward();
  // backward() leaves the update to a later optimizer_step: the ring's slots
  // would be overwritten before it.
  EXPECT_THROW(model.backward(), std::logic_error);
  EXPECT_THROW(model.grads(), std::logic_error);
}

TEST(GradRingModel, AllocatesTheRingNotTheFullGradient) {
  const ModelConfig cfg = four_layers();
  const BatchShape shape{2, 6};
  CpuBackend backend;
  const StepPlan plan = graph_plan(with_buffers(level_preset("v2"), GradBuffers::Ring),
                                   Precision::fp32(), cfg, shape, /*keep_grad_ring=*/true);
  Model model(cfg, shape, plan, backend);
  EXPECT_EQ(model.grad_layout().total(),
            model.layout().total() - 2 * model.layout().layer_span(0).size());
  EXPECT_EQ(model.memory().gradients, model.grad_layout().total() * 4);
  // Layers two apart share a slot; neighbours do not.
  const ParamSlot& wo0 = model.layout().layer(0, &LayerSlots::wo);
  const ParamSlot& wo1 = model.layout().layer(1, &LayerSlots::wo);
  const ParamSlot& wo2 = model.layout().layer(2, &LayerSlots::wo);
  EXPECT_EQ(model.grad(wo0).data, model.grad(wo2).data);
  EXPECT_NE(model.grad(wo0).data, model.grad(wo1).data);
}

}  // namespace
}  // namespace tinyllama
