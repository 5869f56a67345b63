// The per-step scalars that replace launch arguments (so a captured step
// replays with each step's values): their host arithmetic, and that reading
// them by pointer gives the CPU reference exactly what passing values did.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/step_scalars.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

TEST(StepScalars, HoldTheBiasCorrectionsAndScalesOfTheStep) {
  AdamWHyper hp;
  hp.lr = 1e-3f;
  hp.step = 7;
  hp.grad_scale = 512.0f;
  const StepScalars s = make_step_scalars(hp, 512.0f, 40);
  EXPECT_EQ(s.step, 7);
  EXPECT_EQ(s.lr, static_cast<double>(1e-3f));
  EXPECT_EQ(s.grad_scale, 512.0);
  EXPECT_EQ(s.ce_grad_scale, 512.0f / 40.0f);
  EXPECT_DOUBLE_EQ(s.step_size,
                   static_cast<double>(1e-3f) / (1 - std::pow(static_cast<double>(0.9f), 7)));
  EXPECT_DOUBLE_EQ(s.bias2_sqrt, std::sqrt(1 - std::pow(static_cast<double>(0.999f), 7)));
  EXPECT_DOUBLE_EQ(s.decay, 1 - static_cast<double>(1e-3f) * static_cast<double>(0.01f));
  EXPECT_EQ(s.unscale, 1.0 / 512.0);
}

TEST(StepScalars, RejectValuesNoStepCanHave) {
  AdamWHyper hp;
  hp.step = 0;
  EXPECT_THROW(make_step_scalars(hp, 1.0f, 4), std::invalid_argument);
  hp.step = 1;
  EXPECT_THROW(make_step_scalars(hp, 0.0f, 4), std::invalid_argument);
  EXPECT_THROW(make_step_scalars(hp, 1.0f, 0), std::invalid_argument);
  hp.grad_scale = -1.0f;
  EXPECT_THROW(make_step_scalars(hp, 1.0f, 4), std::invalid_argument);
}

std::vector<double> random_values(std::size_t n, std::uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = scale * rng.normal();
  return v;
}

TEST(StepScalars, CpuAdamWReadsThroughThePointerAsByValue) {
  CpuBackend cpu;
  const std::int64_t n = 37;
  auto make = [&](std::uint64_t seed, double scale) { return random_values(n, seed, scale); };
  std::vector<double> p1 = make(1, 1), g = make(2, 300), m1 = make(3, 0.1), v1 = make(4, 0.01);
  for (double& x : v1) x = std::abs(x);
  std::vector<double> p2 = p1, m2 = m1, v2 = v1;
  AdamWHyper hp;
  hp.lr = 3e-3f;
  hp.step = 5;
  hp.grad_scale = 256.0f;
  auto mat = [&](std::vector<double>& x) { return Mat(x.data(), DType::F64, 1, n); };
  cpu.adamw(mat(p1), mat(g), mat(m1), mat(v1), hp);

  const StepScalars s = make_step_scalars(hp, 256.0f, 10);
  AdamWHyper by_pointer;  // lr, step and grad_scale left at defaults: read from s
  by_pointer.scalars = &s;
  cpu.adamw(mat(p2), mat(g), mat(m2), mat(v2), by_pointer);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(v1, v2);
}

ModelConfig tiny() {
  ModelConfig c;
  c.vocab_size = 19;
  c.hidden_dim = 12;
  c.num_layers = 1;
  c.num_heads = 3;
  c.num_kv_heads = 1;
  c.ffn_dim = 14;
  return c;
}

std::vector<std::int32_t> rows(std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> r(3 * 6);
  for (auto& t : r) t = static_cast<std::int32_t>(1 + rng.below(18));
  return r;
}

// The split step (stage_step, then the passes) is the eager one, bit for bit.
TEST(StepScalars, StagedStepsEqualEagerSteps) {
  const BatchShape shape{3, 5};
  CpuBackend a_backend;
  CpuBackend b_backend;
  Model a(tiny(), shape, graph_plan(level_preset("v2"), Precision::fp32(), tiny(), shape),
          a_backend);
  Model b(tiny(), shape, graph_plan(level_preset("v2"), Precision::fp32(), tiny(), shape),
          b_backend);
  const std::vector<double> w = initial_weights(a.layout(), 8);
  a.set_params(w);
  b.set_params(w);
  const float scales[3] = {1024.0f, 2048.0f, 512.0f};
  for (int step = 1; step <= 3; ++step) {
    AdamWHyper hp;
    hp.lr = 2e-3f;
    hp.step = step;
    a.set_batch(rows(static_cast<std::uint64_t>(step)));
    a.forward();
    a.backward(scales[step - 1], true);
    a.optimizer_step(hp);

    b.set_batch(rows(static_cast<std::uint64_t>(step)));
    b.stage_step(scales[step - 1], true, hp);
    b.forward();
    b.backward_pass();
    b.optimizer_pass();
    EXPECT_EQ(a.loss(), b.loss()) << "step " << step;
  }
  EXPECT_EQ(a.grads(), b.grads());
  EXPECT_EQ(a.params(), b.params());
}

}  // namespace
}  // namespace tinyllama
