#pragma once
// A few training steps on the GPU as the trainer runs them (StepRunner:
// captured graphs with parallel branches, steps in flight), for the tests
// that hold one plan to another's bits: each step's loss, then the weights.
#include <cstdint>
#include <vector>

#include "gpu_model_util.h"
#include "model/model.h"
#include "train/step_runner.h"

namespace tinyllama::gpu_test {

// A model of 3 layers, GQA with 2 query heads a key/value head, and a
// vocabulary of 101, at B3 S37: odd sizes everywhere.
inline ModelConfig trained_run_config() {
  ModelConfig c;
  c.vocab_size = 101;
  c.hidden_dim = 192;
  c.num_layers = 3;
  c.num_heads = 6;
  c.num_kv_heads = 3;
  c.ffn_dim = 200;
  return c;
}
inline constexpr BatchShape kTrainedRunShape{3, 37};

struct TrainedRun {
  std::vector<double> losses;
  std::vector<double> params;
};

// From weights(), at learning rate 1e-3; step i trains on the batch from seed + i.
inline TrainedRun train_in_flight(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan,
                                  Backend& backend, int steps, std::uint64_t seed) {
  Model model(cfg, shape, plan, backend);
  model.set_params(weights(model.layout()));
  LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic, 1024.0, 2000);
  AdamWHyper hp;
  hp.lr = 1e-3f;
  StepRunner runner(model, scaler, hp);
  TrainedRun out;
  for (int i = 0; i < steps; ++i) {
    const std::vector<std::int32_t> rows =
        random_rows(shape.batch, shape.seq, cfg.vocab_size, seed + static_cast<std::uint64_t>(i));
    while (!runner.can_launch()) out.losses.push_back(runner.finish().loss);
    runner.launch(rows);
  }
  while (runner.in_flight() > 0) out.losses.push_back(runner.finish().loss);
  out.params = model.params();
  return out;
}

}  // namespace tinyllama::gpu_test
