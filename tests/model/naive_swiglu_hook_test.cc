// The exercise fault naive-swiglu reaches the passes: with it in the plan
// every layer's gate/up projection goes through Backend::naive_linear (and
// no other op does), with the same result as the GEMMs; without it, never.
#include <gtest/gtest.h>

#include <vector>

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
  int calls = 0;
};

double loss_with(bool naive, const std::string& level, int* calls) {
  ModelConfig cfg;
  cfg.vocab_size = 29;
  cfg.hidden_dim = 16;
  cfg.num_layers = 3;
  cfg.num_heads = 2;
  cfg.num_kv_heads = 1;
  cfg.ffn_dim = 24;
  const BatchShape shape{2, 5};
  CountingBackend backend;
  StepPlan plan = test_plan(level, Precision::fp64(), backend, cfg, shape);
  plan.faults.naive_swiglu = naive;
  Model model(cfg, shape, plan, backend);
  model.set_params(initial_weights(model.layout(), 7));
  std::vector<std::int32_t> rows(static_cast<std::size_t>(shape.batch * (shape.seq + 1)));
  Rng rng(8);
  for (auto& t : rows) t = static_cast<std::int32_t>(1 + rng.below(28));
  model.set_batch(rows);
  model.forward();
  *calls = backend.calls;
  return model.loss();
}

TEST(NaiveSwigluHook, EveryLayersGateUpGoesThroughTheNaiveKernel) {
  for (const std::string level : {"v1", "v2"}) {
    int naive_calls = -1, gemm_calls = -1;
    const double naive = loss_with(true, level, &naive_calls);
    const double gemm = loss_with(false, level, &gemm_calls);
    EXPECT_EQ(naive_calls, 3) << level;
    EXPECT_EQ(gemm_calls, 0) << level;
    EXPECT_NEAR(naive, gemm, 1e-12 * gemm) << level;  // fp64: summation order only
  }
}

}  // namespace
}  // namespace tinyllama
