// The exercise faults reach the passes: with naive-swiglu in the plan every
// layer's gate/up projection goes through ExerciseOps::naive_linear, with
// noncontiguous-kv every layer's attention forward through
// strided_kv_attention_forward, with the same loss and gradients as the
// healthy ops; without them, never. A backend without exercise ops refuses
// either fault by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

class CountingBackend : public CpuBackend {
 public:
  void naive_linear(Mat out, Mat x, Mat w) override {
    ++calls;
    CpuBackend::naive_linear(out, x, w);
  }
  void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                    const AttentionShape& shape) override {
    ++calls;
    CpuBackend::strided_kv_attention_forward(out, lse, q, k, v, shape);
  }
  int calls = 0;
};

// The CPU backend as a backend without the exercise ops sees it.
class WithoutExerciseOps final : public CpuBackend {
 public:
  ExerciseOps* exercise_ops() override { return nullptr; }
};

struct Outcome {
  double loss = 0;
  std::vector<double> grads;
};

Outcome run_on(Backend& backend, const InjectedFaults& faults, const std::string& level) {
  ModelConfig cfg;
  cfg.vocab_size = 29;
  cfg.hidden_dim = 16;
  cfg.num_layers = 3;
  cfg.num_heads = 2;
  cfg.num_kv_heads = 1;
  cfg.ffn_dim = 24;
  const BatchShape shape{2, 5};
  StepPlan plan = test_plan(level, Precision::fp64(), backend, cfg, shape);
  plan.faults = faults;
  Model model(cfg, shape, plan, backend);
  model.set_params(initial_weights(model.layout(), 7));
  std::vector<std::int32_t> rows(static_cast<std::size_t>(shape.batch * (shape.seq + 1)));
  Rng rng(8);
  for (auto& t : rows) t = static_cast<std::int32_t>(1 + rng.below(28));
  model.set_batch(rows);
  model.forward();
  model.backward();
  return {model.loss(), model.grads()};
}

Outcome run_with(const InjectedFaults& faults, const std::string& level, int* calls) {
  CountingBackend backend;
  const Outcome outcome = run_on(backend, faults, level);
  *calls = backend.calls;
  return outcome;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_NEAR(a.loss, b.loss, 1e-12 * b.loss) << what;  // fp64: summation order only
  ASSERT_EQ(a.grads.size(), b.grads.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < a.grads.size(); ++i) {
    worst = std::max(worst, std::abs(a.grads[i] - b.grads[i]));
    scale = std::max(scale, std::abs(b.grads[i]));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(worst, 1e-12 * scale) << what;
}

TEST(FaultHooks, EveryLayersGateUpGoesThroughTheNaiveKernel) {
  for (const std::string level : {"v1", "v2"}) {
    int naive_calls = -1, healthy_calls = -1;
    InjectedFaults naive;
    naive.naive_swiglu = true;
    const Outcome slow = run_with(naive, level, &naive_calls);
    const Outcome healthy = run_with({}, level, &healthy_calls);
    EXPECT_EQ(naive_calls, 3) << level;
    EXPECT_EQ(healthy_calls, 0) << level;
    expect_same(slow, healthy, "naive-swiglu " + level);
  }
}

TEST(FaultHooks, EveryLayersAttentionGoesThroughTheStridedKernel) {
  for (const std::string level : {"v2", "v3"}) {  // flash attention: the backward reads the lse
    int strided_calls = -1, healthy_calls = -1;
    InjectedFaults strided;
    strided.noncontiguous_kv = true;
    const Outcome slow = run_with(strided, level, &strided_calls);
    const Outcome healthy = run_with({}, level, &healthy_calls);
    EXPECT_EQ(strided_calls, 3) << level;
    EXPECT_EQ(healthy_calls, 0) << level;
    expect_same(slow, healthy, "noncontiguous-kv " + level);
  }
}

TEST(FaultHooks, ABackendWithoutExerciseOpsRefusesEitherFaultByName) {
  InjectedFaults naive;
  naive.naive_swiglu = true;
  InjectedFaults strided;
  strided.noncontiguous_kv = true;
  const struct {
    InjectedFaults faults;
    std::string message;
  } cases[] = {
      {naive, "--inject naive-swiglu: the cpu backend has no naive kernel"},
      {strided, "--inject noncontiguous-kv: the cpu backend has no strided attention kernel"},
  };
  for (const auto& c : cases) {
    WithoutExerciseOps backend;
    try {
      run_on(backend, c.faults, "v2");
      ADD_FAILURE() << "ran without " << c.message;
    } catch (const RuntimeFailure& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

}  // namespace
}  // namespace tinyllama
