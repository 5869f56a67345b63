// StepPlan::scratch_over_logits on the GPU: the backward scratch laid over
// the LM head's logits is first written after the last layer's backward
// joins the head's last weight-gradient GEMM (which reads the logits on the
// side branch), so a run with it trains to the same bits as a run with the
// scratch apart -- losses and weights, step after step, captured graphs with
// parallel branches and steps in flight as the trainer runs them, the loss
// in several chunks and a large vocabulary (the head's weight gradient the
// step's longest GEMM).
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_util.h"
#include "gpu_trained_run.h"

namespace tinyllama::gpu_test {
namespace {

// A large vocabulary: the head's weight gradient, which the last layer's
// backward waits for, is the step's longest GEMM.
ModelConfig config() {
  ModelConfig c = trained_run_config();
  c.vocab_size = 6007;
  return c;
}

TrainedRun train(DType t, const std::string& level, bool over_logits) {
  const ModelConfig cfg = config();
  const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
  StepPlan plan = test_plan(level_preset(level), precision_for(t), *backend, cfg, kTrainedRunShape);
  // Four chunks of the 111 tokens where the loss is chunked.
  if (plan.ops.loss == LossImpl::Chunked) plan.loss_chunk_rows = 32;
  plan.scratch_over_logits = over_logits;
  return train_in_flight(cfg, kTrainedRunShape, plan, *backend, 5, 500);
}

using OverLogitsParam = std::tuple<DType, std::string>;

class GpuScratchOverLogits : public GpuParamTest<OverLogitsParam> {};

TEST_P(GpuScratchOverLogits, TrainsToTheSameBitsAsTheScratchApart) {
  const auto [t, level] = GetParam();
  const TrainedRun apart = train(t, level, false);
  const TrainedRun over = train(t, level, true);
  ASSERT_EQ(apart.losses.size(), 5u);
  EXPECT_EQ(apart.losses, over.losses);
  EXPECT_EQ(apart.params, over.params);
}

INSTANTIATE_TEST_SUITE_P(Levels, GpuScratchOverLogits,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values("v1", "v2", "v3", "v4")),
                         [](const auto& info) {
                           return dtype_label(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace tinyllama::gpu_test
