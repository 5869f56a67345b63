// StepPlan::scratch_over_logits on the GPU: the backward scratch laid over
// the last block's output, the LM head's logits and the FP8 forward copies
// is first written after the last layer's backward joins the head's last
// weight-gradient GEMM (which reads the logits on the side branch), so a
// run with it trains to the same bits as a run with the scratch apart --
// losses and weights, step after step, captured graphs with parallel
// branches and steps in flight as the trainer runs them, the loss in
// several chunks and a large vocabulary (the head's weight gradient the
// step's longest GEMM), and in FP8 with the FP8 backward copies over them.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_fp8_plans.h"
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

void expect_same_run(const TrainedRun& apart, const TrainedRun& over) {
  ASSERT_EQ(apart.losses.size(), 5u);
  EXPECT_EQ(apart.losses, over.losses);
  EXPECT_EQ(apart.params, over.params);
}

TEST_P(GpuScratchOverLogits, TrainsToTheSameBitsAsTheScratchApart) {
  const auto [t, level] = GetParam();
  expect_same_run(train(t, level, false), train(t, level, true));
}

INSTANTIATE_TEST_SUITE_P(Levels, GpuScratchOverLogits,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values("v1", "v2", "v3", "v4")),
                         [](const auto& info) {
                           return dtype_label(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

// FP8 (every linear GEMM, delayed scaling, the producers writing their
// codes and the lean buffers, as resolve_plan sets them): the FP8 forward
// copies lie under the scratch, and the backward copies of every linear but
// the down projection over them. Dimensions and tokens multiples of 16.
TrainedRun train_fp8(const std::string& level, ActivationsImpl activations, bool over_logits) {
  ModelConfig cfg = fp8_config();
  cfg.vocab_size = config().vocab_size;
  const std::unique_ptr<Backend> backend = make_cuda_backend(Precision::amp_fp8());
  OpChoices ops = level_preset(level);
  ops.activations = activations;
  StepPlan plan = all_fp8_delayed(test_plan(ops, Precision::amp_fp8(), *backend, cfg, kFp8Shape),
                                  cfg, kFp8Shape, /*lean=*/true);
  if (plan.ops.loss == LossImpl::Chunked) plan.loss_chunk_rows = 32;
  plan.scratch_over_logits = over_logits;
  return train_in_flight(cfg, kFp8Shape, plan, *backend, 5, 700);
}

using Fp8OverLogitsParam = std::tuple<std::string, ActivationsImpl>;

class GpuScratchOverLogitsFp8 : public GpuParamTest<Fp8OverLogitsParam> {};

TEST_P(GpuScratchOverLogitsFp8, TrainsToTheSameBitsAsTheScratchApart) {
  const auto [level, activations] = GetParam();
  expect_same_run(train_fp8(level, activations, false), train_fp8(level, activations, true));
}

INSTANTIATE_TEST_SUITE_P(
    Fp8, GpuScratchOverLogitsFp8,
    ::testing::Combine(::testing::Values("v2", "v4"),
                       ::testing::Values(ActivationsImpl::Stored, ActivationsImpl::RecomputeNorms,
                                         ActivationsImpl::RecomputeNormsSwiglu)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + impl_name(std::get<1>(info.param));
    });

}  // namespace
}  // namespace tinyllama::gpu_test
