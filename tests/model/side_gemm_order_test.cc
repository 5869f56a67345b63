// The backward pass issues weight-gradient GEMMs through Backend::side_gemm,
// which may run at any time until their ticket is joined (CUDA: a second
// stream, a parallel branch of the captured step). This backend runs each
// one at the latest moment the contract allows: when its ticket (or a later
// one) is joined. A join placed after an op that overwrites the GEMM's
// inputs, or a gradient read before its GEMM was joined, then changes the
// result, so comparing with in-order execution finds a missing or late join
// without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/fork_point_gemms.h"
#include "model/init.h"
#include "model/late_side_gemms.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "same_bits.h"
#include "whole_step.h"

namespace tinyllama {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 17;
  c.hidden_dim = 16;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 20;
  return c;
}

std::vector<std::int32_t> random_rows(int batch, int seq, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(batch) * (seq + 1));
  for (auto& t : rows) t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return rows;
}

struct State {
  std::vector<double> grads, params;
};

// Two training steps; the gradients and weights after each. whole_steps:
// as StepRunner runs them (stage_step, then the passes, with the layers
// updated during the backward pass); otherwise backward(), then
// optimizer_step().
// Every linear dimension and the tokens multiples of 16: all its GEMMs FP8.
ModelConfig fp8_tiny_config() {
  ModelConfig c = tiny_config();
  c.ffn_dim = 32;
  return c;
}

// fp8: every linear GEMM in FP8 (emulated on the CPU), whose copies the
// weight gradients read on the side branch.
std::vector<State> train(Backend& backend, const OpChoices& ops,
                         const std::function<void()>& after_backward, bool whole_steps = false,
                         bool fp8 = false) {
  const ModelConfig cfg = fp8 ? fp8_tiny_config() : tiny_config();
  const BatchShape shape{2, fp8 ? 8 : 6};
  StepPlan plan = graph_plan(ops, Precision::fp64(), cfg, shape);
  if (fp8) {
    plan.fp8 = choose_fp8_linears(cfg, shape, Fp8Choice::All);
    if (plan.ops.swiglu == SwigluImpl::Gemm) plan.ops.swiglu = SwigluImpl::Fused;
  }
  Model model(cfg, shape, plan, backend);
  model.set_params(initial_weights(model.layout(), 5));
  AdamWHyper hp;
  hp.lr = 1e-2f;
  std::vector<State> out;
  for (int step = 1; step <= 2; ++step) {
    model.set_batch(random_rows(shape.batch, shape.seq, cfg.vocab_size, 40 + step));
    hp.step = step;
    if (whole_steps) {
      run_whole_step(model, hp);
      after_backward();
      out.push_back({model.grads(), model.params()});
      continue;
    }
    model.forward();
    model.backward(1.0f, false);
    after_backward();
    out.push_back({model.grads(), {}});
    model.optimizer_step(hp);
    out.back().params = model.params();
  }
  return out;
}

// Step by step, the gradients and the weights to the bit.
void expect_same_states(const std::vector<State>& expected, const std::vector<State>& got) {
  ASSERT_EQ(expected.size(), got.size());
  for (std::size_t s = 0; s < got.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    EXPECT_TRUE(same_bits(expected[s].grads, got[s].grads)) << "gradients differ";
    EXPECT_TRUE(same_bits(expected[s].params, got[s].params)) << "weights differ";
  }
}

// (qkv_fusion, swiglu_fusion): the unfused forms issue several side GEMMs
// per projection.
class SideGemmOrder : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

OpChoices v2_with(bool qkv_fused, bool gate_up_fused) {
  OpChoices ops = level_preset("v2");
  ops.qkv_gemm = qkv_fused ? GemmGrouping::Fused : GemmGrouping::Separate;
  ops.gate_up_gemm = gate_up_fused ? GemmGrouping::Fused : GemmGrouping::Separate;
  return ops;
}

TEST_P(SideGemmOrder, LatestAllowedExecutionGivesTheInOrderResult) {
  const OpChoices level = v2_with(std::get<0>(GetParam()), std::get<1>(GetParam()));

  CpuBackend in_order;
  const std::vector<State> expected = train(in_order, level, [] {});
  LateSideGemms late;
  const std::vector<State> got =
      train(late, level, [&] { EXPECT_EQ(late.pending(), 0u) << "unjoined after backward"; });

  expect_same_states(expected, got);
  // Not vacuous: every weight gradient went through side_gemm (LM head and
  // four projections per layer, more slices when unfused), and several
  // were held back at once.
  const int per_layer = (level.qkv_gemm == GemmGrouping::Fused ? 1 : 3) +
                        (level.gate_up_gemm == GemmGrouping::Fused ? 1 : 2) + 2;
  EXPECT_EQ(late.deferred(), 2 * (1 + tiny_config().num_layers * per_layer));
  EXPECT_GE(late.most_pending(), 3u);
}

// The same for whole steps, whose layers are updated during the backward
// pass: each update run as early as it may (right after the side GEMMs
// issued before it), then held back as long as it may (until the optimizer
// pass joins them).
TEST_P(SideGemmOrder, EarliestAndLatestLayerUpdatesGiveTheInOrderResult) {
  const OpChoices level = v2_with(std::get<0>(GetParam()), std::get<1>(GetParam()));

  CpuBackend in_order;
  const std::vector<State> expected = train(
      in_order, level, [] {}, /*whole_steps=*/true);
  for (const bool late_updates : {false, true}) {
    SCOPED_TRACE(late_updates ? "latest updates" : "earliest updates");
    LateSideGemms late(late_updates);
    const std::vector<State> got = train(
        late, level,
        [&] {
          EXPECT_EQ(late.pending(), 0u) << "side GEMMs unjoined after the step";
          EXPECT_EQ(late.pending_updates(), 0u) << "layer updates unjoined after the step";
        },
        /*whole_steps=*/true);

    expect_same_states(expected, got);
    // Not vacuous: every layer of both steps went through side_adamw_fused.
    EXPECT_EQ(late.deferred_updates(), 2 * tiny_config().num_layers);
    EXPECT_FALSE(same_bits(got.front().params, got.back().params));
  }
}

// The weight-gradient GEMMs issued after their input gradient start from
// before it (Backend::side_gemm_from_fork): run at that fork point, they
// must find their operands unchanged by what was issued in between.
void expect_fork_point_result(const OpChoices& level) {
  CpuBackend in_order;
  const std::vector<State> expected = train(in_order, level, [] {});
  ForkPointGemms early;
  const std::vector<State> got = train(early, level, [] {});
  expect_same_states(expected, got);
  // Not vacuous: every weight gradient but the LM head's chunks came from a
  // fork point (the LM head's too: one chunk at this size).
  const int per_layer = (level.qkv_gemm == GemmGrouping::Fused ? 1 : 3) +
                        (level.gate_up_gemm == GemmGrouping::Fused ? 1 : 2) + 2;
  EXPECT_EQ(early.from_fork(), 2 * (1 + tiny_config().num_layers * per_layer));
}

TEST_P(SideGemmOrder, ForkPointExecutionGivesTheInOrderResult) {
  expect_fork_point_result(v2_with(std::get<0>(GetParam()), std::get<1>(GetParam())));
}

TEST(SideGemmOrderLevels, ForkPointExecutionGivesTheInOrderResultAtV3AndV4) {
  for (const char* name : {"v3", "v4"}) {
    SCOPED_TRACE(name);
    expect_fork_point_result(level_preset(name));
  }
  OpChoices gemm_swiglu = level_preset("v4");
  gemm_swiglu.swiglu = SwigluImpl::Gemm;  // the down GEMM's input gradient writes d_gate_up too
  SCOPED_TRACE("v4, swiglu gemm");
  expect_fork_point_result(gemm_swiglu);
}

// Under FP8 the weight gradients read the copies of dy and x made before the
// fork, in buffers per linear that the next layer's same linear overwrites:
// held back to their join, or run at their fork, they still read what they
// should.
TEST(SideGemmOrderFp8, LatestAndForkPointExecutionGiveTheInOrderResult) {
  for (const char* name : {"v2", "v4"}) {
    SCOPED_TRACE(name);
    const OpChoices level = level_preset(name);
    CpuBackend in_order;
    const std::vector<State> expected = train(
        in_order, level, [] {}, false, /*fp8=*/true);
    LateSideGemms late;
    expect_same_states(expected, train(
                                     late, level, [] {}, false, true));
    ForkPointGemms early;
    expect_same_states(expected, train(
                                     early, level, [] {}, false, true));
    // Not vacuous: the four projections' weight gradients of every layer
    // went through the FP8 side GEMM, in both steps (the LM head's in bf16).
    EXPECT_EQ(early.fp8_from_fork(), 2 * tiny_config().num_layers * 4);
    EXPECT_EQ(early.from_fork(), 2 * (1 + tiny_config().num_layers * 4));
  }
}

INSTANTIATE_TEST_SUITE_P(Fusions, SideGemmOrder,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "qkv_fused" : "qkv_split") +
                                  (std::get<1>(info.param) ? "_gu_fused" : "_gu_split");
                         });

}  // namespace
}  // namespace tinyllama
