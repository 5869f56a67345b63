// The CPU backend's fast kind (BLAS GEMMs and attention, what `tinyllama
// train --device cpu` runs) against its reference kind on a whole model
// step in fp32: the same loss and gradients to fp32 rounding, at v1
// (materialised attention: P kept) and v2 (flash: P from lse). fp64
// stays on the reference loops in both kinds, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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
  c.vocab_size = 61;
  c.hidden_dim = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 72;
  return c;
}

struct Result {
  double loss;
  std::vector<double> grads;
};

Result one_step(CpuKernels kernels, const std::string& level, Precision precision) {
  const ModelConfig cfg = small_config();
  const BatchShape shape{3, 29};
  CpuBackend backend(kernels);
  Model model(cfg, shape, test_plan(level, precision, backend, cfg, shape), backend);
  model.set_params(initial_weights(model.layout(), 5));
  Rng rng(9);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(shape.batch) * (shape.seq + 1));
  for (auto& t : rows) t = static_cast<std::int32_t>(1 + rng.below(cfg.vocab_size - 1));
  model.set_batch(rows);
  model.forward();
  model.backward();
  return {model.loss(), model.grads()};
}

double rel_err(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

class CpuFastBackend : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuFastBackend, Fp32StepMatchesReference) {
  const Result want = one_step(CpuKernels::Reference, GetParam(), Precision::fp32());
  const Result got = one_step(CpuKernels::Fast, GetParam(), Precision::fp32());
  ASSERT_GT(std::abs(want.loss), 1.0);
  EXPECT_LT(std::abs(got.loss - want.loss) / std::abs(want.loss), 1e-6);
  EXPECT_TRUE(std::any_of(want.grads.begin(), want.grads.end(), [](double g) { return g != 0; }));
  // The parity test's bar for fp32 against PyTorch's fp64.
  EXPECT_LT(rel_err(got.grads, want.grads), 1e-5);
}

TEST_P(CpuFastBackend, Fp64StaysOnTheReferenceLoops) {
  const Result want = one_step(CpuKernels::Reference, GetParam(), Precision::fp64());
  const Result got = one_step(CpuKernels::Fast, GetParam(), Precision::fp64());
  EXPECT_EQ(got.loss, want.loss);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  EXPECT_EQ(std::memcmp(got.grads.data(), want.grads.data(), got.grads.size() * sizeof(double)), 0);
}

INSTANTIATE_TEST_SUITE_P(Levels, CpuFastBackend, ::testing::Values("v1", "v2"));

}  // namespace
}  // namespace tinyllama
