// StepPlan::scratch_over_logits on the GPU: the backward scratch laid over
// the LM head's logits is first written after the last layer's backward
// joins the head's last weight-gradient GEMM (which reads the logits on the
// side branch), so a run with it trains to the same bits as a run with the
// scratch apart -- losses and weights, step after step, captured graphs with
// parallel branches and steps in flight as the trainer runs them, the loss
// in several chunks and a vocabulary large enough that the head's weight
// gradient is still running when the layers' backward starts.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_model_util.h"
#include "gpu_test_util.h"
#include "model/model.h"
#include "train/step_runner.h"

namespace tinyllama::gpu_test {
namespace {

ModelConfig config() {
  ModelConfig c;
  c.vocab_size = 6007;
  c.hidden_dim = 192;
  c.num_layers = 3;
  c.num_heads = 6;
  c.num_kv_heads = 3;
  c.ffn_dim = 200;
  return c;
}

constexpr BatchShape kShape{3, 37};

struct Trained {
  std::vector<double> losses;
  std::vector<double> params;
};

Trained train(DType t, const std::string& level, bool over_logits) {
  const ModelConfig cfg = config();
  const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
  OpChoices ops = level_preset(level);
  StepPlan plan = test_plan(ops, precision_for(t), *backend, cfg, kShape);
  // Four chunks of the 111 tokens where the loss is chunked.
  if (plan.ops.loss == LossImpl::Chunked) plan.loss_chunk_rows = 32;
  plan.scratch_over_logits = over_logits;
  Model model(cfg, kShape, plan, *backend);
  model.set_params(weights(model.layout()));
  LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic, 1024.0, 2000);
  AdamWHyper hp;
  hp.lr = 1e-3f;
  StepRunner runner(model, scaler, hp);
  Trained out;
  for (int i = 0; i < 5; ++i) {
    const std::vector<std::int32_t> rows =
        random_rows(kShape.batch, kShape.seq, cfg.vocab_size, 500 + static_cast<std::uint64_t>(i));
    while (!runner.can_launch()) out.losses.push_back(runner.finish().loss);
    runner.launch(rows);
  }
  while (runner.in_flight() > 0) out.losses.push_back(runner.finish().loss);
  out.params = model.params();
  return out;
}

using OverLogitsParam = std::tuple<DType, std::string>;

class GpuScratchOverLogits : public GpuParamTest<OverLogitsParam> {};

TEST_P(GpuScratchOverLogits, TrainsToTheSameBitsAsTheScratchApart) {
  const auto [t, level] = GetParam();
  const Trained apart = train(t, level, false);
  const Trained over = train(t, level, true);
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
