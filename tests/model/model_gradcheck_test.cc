// The whole model's hand-written backward pass against central finite
// differences of its forward pass, in fp64, for every combination of the
// level toggles that changes the math's composition.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "random_batch.h"

namespace tinyllama {
namespace {

ModelConfig tiny_config(int heads, int kv_heads) {
  ModelConfig c;
  c.vocab_size = 13;
  c.hidden_dim = 4 * heads;  // head_dim 4
  c.num_layers = 2;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.ffn_dim = 10;
  return c;
}

// Norm weights start at exactly 1; perturb everything so no symmetry hides a bug.
std::vector<double> perturbed_weights(const ParamLayout& layout, std::uint64_t seed) {
  std::vector<double> w = initial_weights(layout, seed);
  Rng rng(seed + 7);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i)
      w[s.offset + i] += s.is_norm ? 0.3 * rng.normal() : 0.2 * rng.normal();
  }
  return w;
}

struct GradCheckCase {
  int heads, kv_heads;
  OpChoices ops;
};

class ModelGradCheck : public ::testing::TestWithParam<GradCheckCase> {};

TEST_P(ModelGradCheck, BackwardMatchesFiniteDifferences) {
  const GradCheckCase c = GetParam();
  const ModelConfig cfg = tiny_config(c.heads, c.kv_heads);
  const BatchShape shape{2, 5};
  CpuBackend backend;
  Model model(cfg, shape, test_plan(c.ops, Precision::fp64(), backend, cfg, shape), backend);
  const std::vector<double> w = perturbed_weights(model.layout(), 42);
  model.set_params(w);
  model.set_batch(random_rows(shape.batch, shape.seq, cfg.vocab_size, 3));

  model.forward();
  model.backward();
  const std::vector<double> analytic = model.grads();

  const double h = 1e-5;
  double diff2 = 0, ref2 = 0;
  std::vector<double> probe = w;
  for (const ParamSlot& s : model.layout().slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      const std::int64_t k = s.offset + i;
      probe[k] = w[k] + h;
      model.set_params(probe);
      model.forward();
      const double up = model.loss();
      probe[k] = w[k] - h;
      model.set_params(probe);
      model.forward();
      const double down = model.loss();
      probe[k] = w[k];
      const double numeric = (up - down) / (2 * h);
      diff2 += (numeric - analytic[k]) * (numeric - analytic[k]);
      ref2 += numeric * numeric;
    }
  }
  ASSERT_GT(ref2, 0.0);
  EXPECT_LT(std::sqrt(diff2 / ref2), 1e-6) << named_summary(c.ops);
}

// The presets' op choices with one changed: a few representative mixes
// for the (slow) finite-difference check; ModelLevels below covers every
// single change.
OpChoices choices(GemmGrouping qkv, GemmGrouping gate_up, SwigluImpl swiglu, AttentionImpl attn) {
  OpChoices ops = level_preset("v1");
  ops.qkv_gemm = qkv;
  ops.gate_up_gemm = gate_up;
  ops.swiglu = swiglu;
  ops.attention = attn;
  return ops;
}

constexpr GemmGrouping kSep = GemmGrouping::Separate;
constexpr GemmGrouping kFused = GemmGrouping::Fused;

INSTANTIATE_TEST_SUITE_P(
    Levels, ModelGradCheck,
    ::testing::Values(
        GradCheckCase{2, 1, level_preset("v1")}, GradCheckCase{2, 1, level_preset("v2")},
        GradCheckCase{4, 4, choices(kFused, kSep, SwigluImpl::Separate, AttentionImpl::Flash)},
        GradCheckCase{4, 2, choices(kSep, kFused, SwigluImpl::Fused, AttentionImpl::Materialized)},
        GradCheckCase{4, 1,
                      choices(kFused, kFused, SwigluImpl::Fused, AttentionImpl::Materialized)}),
    [](const auto& info) {
      const GradCheckCase& c = info.param;
      return "H" + std::to_string(c.heads) + "_K" + std::to_string(c.kv_heads) + "_qkv_" +
             impl_name(c.ops.qkv_gemm) + "_gu_" + impl_name(c.ops.gate_up_gemm) + "_swiglu_" +
             impl_name(c.ops.swiglu) + "_" + impl_name(c.ops.attention);
    });

// Every level, and every level with one choice changed, computes the same
// function: identical losses and gradients up to fp64 rounding, from the
// same weights and batch.
TEST(ModelLevels, LevelsAndSingleChangesAgree) {
  const ModelConfig cfg = tiny_config(4, 2);
  const BatchShape shape{3, 7};
  CpuBackend backend;
  std::vector<double> ref_grads;
  double ref_loss = 0;
  const std::vector<PlanVariant> variants = level_variants();
  ASSERT_GT(variants.size(), 4u);
  for (const PlanVariant& v : variants) {
    Model model(cfg, shape, graph_plan(v.ops, Precision::fp64(), cfg, shape), backend);
    model.set_params(perturbed_weights(model.layout(), 5));
    model.set_batch(random_rows(shape.batch, shape.seq, cfg.vocab_size, 9));
    model.forward();
    model.backward();
    const std::vector<double> g = model.grads();
    if (ref_grads.empty()) {
      ref_grads = g;
      ref_loss = model.loss();
      continue;
    }
    EXPECT_NEAR(model.loss(), ref_loss, 1e-12) << v.name;
    double worst = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      worst = std::max(worst, std::abs(g[i] - ref_grads[i]));
    EXPECT_LT(worst, 1e-12) << v.name;
  }
}

}  // namespace
}  // namespace tinyllama
