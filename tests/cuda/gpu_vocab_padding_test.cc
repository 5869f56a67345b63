// The loss over an odd vocabulary on the GPU (vocab 97, padded to 128 rows
// for the LM-head GEMMs):
//  * the chunked loss in several chunks, the last one short, gives the
//    float64 CPU reference's loss and gradients, through both ways the
//    head's backward runs (inside the training forward pass, with the
//    head's weight gradient accumulated over the chunks on the side
//    branch; and recomputed by the backward after a loss-only forward);
//    and at vocab 12401 (padded to 12416), whose rows the loss kernel
//    stages in shared memory in every precision;
//  * the embedding's rows past the vocabulary stay exactly zero --
//    parameters and both AdamW moments -- over replayed steps at v3 and
//    v4, so their gradients were zero too and no update touched them.
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/cpu_backend.h"
#include "gpu_model_util.h"
#include "gpu_test_util.h"
#include "model/model.h"
#include "train/step_runner.h"

namespace tinyllama::gpu_test {
namespace {

constexpr std::int64_t kChunkRows = 64;  // 210 tokens: chunks of 64, 64, 64 and 18

struct LossRun {
  double loss = 0;
  std::vector<double> grads;
};

StepPlan chunked_plan(const std::string& level, OpChoices ops, DType t, const Backend& backend,
                      const ModelConfig& cfg) {
  PlanRequest request;
  request.level = level;
  request.ops = ops;
  request.precision = precision_for(t);
  request.loss_chunk_rows = kChunkRows;
  return resolve_plan(request, run_caps(backend.caps(), request, cfg, kSmallStep), cfg, kSmallStep);
}

LossRun chunked_on_gpu(const ModelConfig& cfg, DType t, bool whole_step,
                       const std::vector<double>& w, const std::vector<std::int32_t>& batch,
                       float scale) {
  const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
  OpChoices ops = with_full_gradients(level_preset("v3"));
  ops.execution = Execution::Eager;
  const StepPlan plan = chunked_plan("custom", ops, t, *backend, cfg);
  EXPECT_EQ(plan.ops.loss, LossImpl::Chunked);
  EXPECT_EQ(plan.loss_chunk_rows, kChunkRows);
  Model model(cfg, kSmallStep, plan, *backend);
  model.set_params(w);
  model.set_batch(batch);
  const bool scaled = t == DType::F16;
  if (whole_step) {
    model.stage_step(scale, scaled, AdamWHyper{});
    model.forward_pass();
    model.backward_pass(/*update_layers=*/false);
  } else {
    model.forward();
    model.backward(scale, scaled);
  }
  return {model.loss(), model.grads()};
}

class GpuChunkedLoss : public GpuParamTest<std::tuple<DType, bool, std::int64_t>> {};

TEST_P(GpuChunkedLoss, SeveralChunksGiveTheReferenceGradients) {
  const auto [t, whole_step, vocab] = GetParam();
  ModelConfig cfg = small_gqa_config();
  cfg.vocab_size = vocab;
  CpuBackend cpu_backend;
  Model ref(cfg, kSmallStep, test_plan("v1", Precision::fp64(), cpu_backend, cfg, kSmallStep),
            cpu_backend);
  const std::vector<double> w = weights(ref.layout());
  const std::vector<std::int32_t> batch =
      random_rows(kSmallStep.batch, kSmallStep.seq, cfg.vocab_size, 21);
  const bool scaled = t == DType::F16;
  const float scale = scaled ? 1024.0f : 1.0f;
  ref.set_params(w);
  ref.set_batch(batch);
  ref.forward();
  ref.backward(scale, scaled);

  const LossRun gpu = chunked_on_gpu(cfg, t, whole_step, w, batch, scale);
  // As GpuModelStep: relative 2-norm error per gradient tensor.
  const double tol = low_precision(t) ? 5e-2 : 1e-4;
  EXPECT_NEAR(gpu.loss, ref.loss(), (low_precision(t) ? 1e-2 : 1e-5) * ref.loss());
  const auto [err, slot] = worst_slot(ref.layout(), gpu.grads, ref.grads());
  EXPECT_LE(err, tol) << "worst gradient: " << slot;
}

INSTANTIATE_TEST_SUITE_P(Chunks, GpuChunkedLoss,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()), ::testing::Bool(),
                                            ::testing::Values<std::int64_t>(97, 12401)),
                         [](const auto& info) {
                           return dtype_label(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_whole_step" : "_forward_backward") +
                                  "_V" + std::to_string(std::get<2>(info.param));
                         });

class GpuPaddedVocabRows : public GpuParamTest<std::tuple<DType, std::string>> {};

TEST_P(GpuPaddedVocabRows, StayZeroOverReplayedSteps) {
  const auto [t, level] = GetParam();
  const ModelConfig cfg = small_gqa_config();
  ASSERT_GT(cfg.padded_vocab(), cfg.vocab_size);
  const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
  const StepPlan plan = chunked_plan(level, level_preset(level), t, *backend, cfg);
  Model model(cfg, kSmallStep, plan, *backend);
  const std::vector<double> w = weights(model.layout());
  model.set_params(w);
  LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic, 1024.0, 2000);
  AdamWHyper hp;
  hp.lr = 1e-3f;
  StepRunner runner(model, scaler, hp);
  for (int i = 0; i < 4; ++i) {
    runner.run(random_rows(kSmallStep.batch, kSmallStep.seq, cfg.vocab_size,
                           40 + static_cast<std::uint64_t>(i)));
  }
  EXPECT_TRUE(runner.replaying()) << runner.note();

  const std::vector<double> params = model.params();
  const std::vector<double> m = model.adam_m();
  const std::vector<double> v = model.adam_v();
  std::vector<bool> used(static_cast<std::size_t>(model.layout().total()), false);
  for (const ParamSlot& s : model.layout().slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i)
      used[static_cast<std::size_t>(s.offset + i)] = true;
  }
  std::size_t unused = 0;
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (used[i]) continue;
    ++unused;
    ASSERT_EQ(params[i], 0.0) << "padding element " << i;
    ASSERT_EQ(m[i], 0.0) << "padding element " << i;
    ASSERT_EQ(v[i], 0.0) << "padding element " << i;
  }
  // The embedding's padded rows are among them, and the weights moved.
  EXPECT_GE(unused,
            static_cast<std::size_t>((cfg.padded_vocab() - cfg.vocab_size) * cfg.hidden_dim));
  EXPECT_NE(params, w);
}

INSTANTIATE_TEST_SUITE_P(Levels, GpuPaddedVocabRows,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values("v3", "v4")),
                         [](const auto& info) {
                           return dtype_label(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace tinyllama::gpu_test
