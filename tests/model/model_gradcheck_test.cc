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

std::vector<std::int32_t> random_rows(int batch, int seq, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(batch) * (seq + 1));
  for (auto& t : rows)
    t = static_cast<std::int32_t>(1 + rng.below(static_cast<std::uint64_t>(vocab - 1)));
  return rows;
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
  LevelOptions level;
};

class ModelGradCheck : public ::testing::TestWithParam<GradCheckCase> {};

TEST_P(ModelGradCheck, BackwardMatchesFiniteDifferences) {
  const GradCheckCase c = GetParam();
  const ModelConfig cfg = tiny_config(c.heads, c.kv_heads);
  const BatchShape shape{2, 5};
  CpuBackend backend;
  Model model(cfg, c.level, Precision::fp64(), shape, backend);
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
  EXPECT_LT(std::sqrt(diff2 / ref2), 1e-6) << c.level.describe();
}

LevelOptions with(bool qkv, bool swiglu, bool flash) {
  return {qkv, swiglu, flash, false};
}

INSTANTIATE_TEST_SUITE_P(Levels, ModelGradCheck,
                         ::testing::Values(GradCheckCase{2, 1, LevelOptions::v1()},
                                           GradCheckCase{2, 1, with(true, true, true)},
                                           GradCheckCase{4, 4, with(true, false, true)},
                                           GradCheckCase{4, 2, with(false, true, false)},
                                           GradCheckCase{4, 1, with(true, true, false)}),
                         [](const auto& info) {
                           const GradCheckCase& c = info.param;
                           return "H" + std::to_string(c.heads) + "_K" +
                                  std::to_string(c.kv_heads) + "_qkv" +
                                  std::to_string(c.level.qkv_fusion) + "_swiglu" +
                                  std::to_string(c.level.swiglu_fusion) + "_flash" +
                                  std::to_string(c.level.flash_attention);
                         });

// Every level computes the same function: identical losses and gradients up
// to fp64 rounding, from the same weights and batch.
TEST(ModelLevels, AllToggleCombinationsAgree) {
  const ModelConfig cfg = tiny_config(4, 2);
  const BatchShape shape{3, 7};
  CpuBackend backend;
  std::vector<double> ref_grads;
  double ref_loss = 0;
  for (int bits = 0; bits < 8; ++bits) {
    const LevelOptions level = with(bits & 1, bits & 2, bits & 4);
    Model model(cfg, level, Precision::fp64(), shape, backend);
    model.set_params(perturbed_weights(model.layout(), 5));
    model.set_batch(random_rows(shape.batch, shape.seq, cfg.vocab_size, 9));
    model.forward();
    model.backward();
    const std::vector<double> g = model.grads();
    if (bits == 0) {
      ref_grads = g;
      ref_loss = model.loss();
      continue;
    }
    EXPECT_NEAR(model.loss(), ref_loss, 1e-12) << level.describe();
    double worst = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      worst = std::max(worst, std::abs(g[i] - ref_grads[i]));
    EXPECT_LT(worst, 1e-12) << level.describe();
  }
}

}  // namespace
}  // namespace tinyllama
