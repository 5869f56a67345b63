// fp16 dynamic loss scaling's device half, exercised on the CPU in fp32: a
// scaled backward with the scale divided out in AdamW gives the unscaled
// update, and an overflowing scale is detected and skips the update.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 17;
  c.hidden_dim = 16;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.ffn_dim = 24;
  return c;
}

std::vector<std::int32_t> rows(int batch, int seq) {
  Rng rng(9);
  std::vector<std::int32_t> r(static_cast<std::size_t>(batch) * (seq + 1));
  for (auto& t : r) t = static_cast<std::int32_t>(1 + rng.below(16));
  return r;
}

// Parameters after one step at the given loss scale.
std::vector<double> params_after_step(float scale, bool check, bool* overflowed) {
  CpuBackend backend;
  Model model(small_config(), BatchShape{2, 5},
              test_plan("v1", Precision::fp32(), backend, small_config(), {2, 5}), backend);
  model.set_params(initial_weights(model.layout(), 3));
  model.set_batch(rows(2, 5));
  model.forward();
  model.backward(scale, check);
  *overflowed = model.overflowed();
  AdamWHyper hp;
  hp.lr = 1e-2f;
  model.optimizer_step(hp);
  return model.params();
}

TEST(LossScaling, ScaledGradientsGiveTheUnscaledUpdate) {
  bool overflow = true;
  const std::vector<double> plain = params_after_step(1.0f, false, &overflow);
  EXPECT_FALSE(overflow);
  const std::vector<double> scaled = params_after_step(1024.0f, true, &overflow);
  EXPECT_FALSE(overflow);
  double worst = 0;
  for (std::size_t i = 0; i < plain.size(); ++i)
    worst = std::max(worst, std::abs(plain[i] - scaled[i]));
  EXPECT_LT(worst, 1e-6);  // 1024 is a power of two: only rounding of the 1/1024 differs
}

TEST(LossScaling, NonFiniteGradientsAreFlaggedAndTheUpdateSkipped) {
  CpuBackend backend;
  Model model(small_config(), BatchShape{2, 5},
              test_plan("v1", Precision::fp32(), backend, small_config(), {2, 5}), backend);
  std::vector<double> init = initial_weights(model.layout(), 3);
  // One huge weight in the FFN: fine in fp32 forward, but a 2^124 loss scale
  // pushes its gradients past fp32's range, as fp16 overflows in practice.
  init[model.layout().layer(0, &LayerSlots::wdown).offset] = 1e4;
  model.set_params(init);
  model.set_batch(rows(2, 5));
  const std::vector<double> before = model.params();
  model.forward();
  ASSERT_TRUE(std::isfinite(model.loss()));
  model.backward(std::ldexp(1.0f, 124), true);
  EXPECT_TRUE(model.overflowed());
  AdamWHyper hp;
  model.optimizer_step(hp);
  EXPECT_EQ(model.params(), before) << "the update must be skipped entirely";

  // The next step at a sane scale goes through.
  model.forward();
  model.backward(1024.0f, true);
  EXPECT_FALSE(model.overflowed());
  model.optimizer_step(hp);
  EXPECT_NE(model.params(), before);
}

}  // namespace
}  // namespace tinyllama
