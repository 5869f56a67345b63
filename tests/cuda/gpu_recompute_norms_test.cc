// --activations recompute_norms on the GPU: a run whose backward pass remakes
// the normalised inputs (rmsnorm_apply, after the joins of the side GEMMs
// that last read the shared buffers) trains to the same bits as a run that
// stores them -- losses and weights, step after step, captured graphs with
// parallel branches and steps in flight as the trainer runs them.
// --activations recompute the same, with the SwiGLU output remade too (the
// forward's swiglu kernel, or v1's mul of the kept silu(g) and u, before
// the down weight gradient that reads the shared buffer on the side branch).
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_util.h"
#include "gpu_trained_run.h"

namespace tinyllama::gpu_test {
namespace {

TrainedRun train(DType t, const std::string& level, ActivationsImpl activations) {
  const ModelConfig cfg = trained_run_config();
  const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
  OpChoices ops = level_preset(level);
  ops.activations = activations;
  const StepPlan plan = test_plan(ops, precision_for(t), *backend, cfg, kTrainedRunShape);
  return train_in_flight(cfg, kTrainedRunShape, plan, *backend, 5, 300);
}

using RecomputeParam = std::tuple<DType, std::string>;

class GpuRecomputeNorms : public GpuParamTest<RecomputeParam> {};

TEST_P(GpuRecomputeNorms, TrainsToTheSameBitsAsStoredNorms) {
  const auto [t, level] = GetParam();
  const TrainedRun stored = train(t, level, ActivationsImpl::Stored);
  const TrainedRun recomputed = train(t, level, ActivationsImpl::RecomputeNorms);
  ASSERT_EQ(stored.losses.size(), 5u);
  EXPECT_EQ(stored.losses, recomputed.losses);
  EXPECT_EQ(stored.params, recomputed.params);
}

TEST_P(GpuRecomputeNorms, TrainsToTheSameBitsWithTheSwigluOutputRecomputed) {
  const auto [t, level] = GetParam();
  const TrainedRun stored = train(t, level, ActivationsImpl::Stored);
  const TrainedRun recomputed = train(t, level, ActivationsImpl::RecomputeNormsSwiglu);
  ASSERT_EQ(stored.losses.size(), 5u);
  EXPECT_EQ(stored.losses, recomputed.losses);
  EXPECT_EQ(stored.params, recomputed.params);
}

INSTANTIATE_TEST_SUITE_P(Levels, GpuRecomputeNorms,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values("v1", "v2", "v3")),
                         [](const auto& info) {
                           return dtype_label(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace tinyllama::gpu_test
