#pragma once
// A few whole training steps of a model on the CPU backend, as StepRunner
// runs them, with what the tests that hold one implementation to another's
// bits compare: each step's loss and gradients (read before the update),
// and the weights and AdamW second moments after the last step.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "random_batch.h"
#include "whole_step.h"

namespace tinyllama {

// A model small enough to train a few steps of at every level in
// milliseconds, with GQA (2 query heads a key/value head) and 3 layers.
inline ModelConfig small_trained_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.hidden_dim = 16;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 24;
  return c;
}

struct TrainedSteps {
  std::vector<double> losses, grads, params, adam_v;
};

// Weights from weight_seed; step s (from 1) trains on the batch from
// batch_seed + s, at learning rate 1e-2.
inline TrainedSteps train_cpu_steps(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan,
                                    int steps, std::uint64_t weight_seed,
                                    std::uint64_t batch_seed) {
  CpuBackend backend;
  Model model(cfg, shape, plan, backend);
  model.set_params(initial_weights(model.layout(), weight_seed));
  TrainedSteps r;
  AdamWHyper hp;
  hp.lr = 1e-2f;
  for (int step = 1; step <= steps; ++step) {
    hp.step = step;
    model.set_batch(random_rows(shape.batch, shape.seq, cfg.vocab_size, batch_seed + step));
    model.forward();
    model.backward();
    const std::vector<double> g = model.grads();
    r.grads.insert(r.grads.end(), g.begin(), g.end());
    r.losses.push_back(model.loss());
    run_whole_step(model, hp);
  }
  r.params = model.params();
  r.adam_v = model.adam_v();
  return r;
}

// The same losses, gradients, weights and second moments, to the bit.
inline void expect_same_bits(const TrainedSteps& a, const TrainedSteps& b,
                             const std::string& what) {
  EXPECT_EQ(a.losses, b.losses) << what;
  EXPECT_EQ(a.grads, b.grads) << what;
  EXPECT_EQ(a.params, b.params) << what;
  EXPECT_EQ(a.adam_v, b.adam_v) << what;
}

}  // namespace tinyllama
