#pragma once
// Shared by the whole-model GPU tests (gpu_model_test.cc, gpu_graph_test.cc):
// batches, weights that break the init's symmetries, and the per-tensor
// error of a gradient or parameter block against the CPU reference.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "model/step_plan.h"

namespace tinyllama::gpu_test {

inline std::vector<std::int32_t> random_rows(int batch, int seq, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(batch) * (seq + 1));
  for (auto& t : rows) {
    t = static_cast<std::int32_t>(1 + rng.below(static_cast<std::uint64_t>(vocab - 1)));
  }
  return rows;
}

// Init weights plus a perturbation, so norm weights are not all exactly 1.
inline std::vector<double> weights(const ParamLayout& layout) {
  std::vector<double> w = initial_weights(layout, 11);
  Rng rng(12);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      w[static_cast<std::size_t>(s.offset + i)] += s.is_norm ? 0.2 * rng.normal() : 0.0;
    }
  }
  return w;
}

// Per parameter tensor, ||gpu - cpu|| / ||cpu|| (2-norms); the worst over
// all tensors and its name.
inline std::pair<double, std::string> worst_slot(const ParamLayout& layout,
                                                 const std::vector<double>& gpu,
                                                 const std::vector<double>& cpu) {
  double worst = 0;
  std::string name;
  for (const ParamSlot& s : layout.slots()) {
    double diff2 = 0, ref2 = 0;
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      const auto k = static_cast<std::size_t>(s.offset + i);
      if (!std::isfinite(gpu[k])) return {INFINITY, s.name + " (not finite)"};
      diff2 += (gpu[k] - cpu[k]) * (gpu[k] - cpu[k]);
      ref2 += cpu[k] * cpu[k];
    }
    const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    if (rel >= worst) {
      worst = rel;
      name = s.name;
    }
  }
  return {worst, name};
}

// The whole-step tests' small model: head_dim 64 (the Hopper kernels where
// they run), GQA 2, two layers, at kSmallStep: a sequence with a tail.
inline ModelConfig small_gqa_config() {
  ModelConfig c;
  c.vocab_size = 97;
  c.hidden_dim = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 200;
  return c;
}
inline constexpr BatchShape kSmallStep{3, 70};

// v3's choices with the given rotation, run eagerly: the tests call
// forward and backward one by one.
inline OpChoices eager_v3(RopeImpl rope) {
  OpChoices ops = level_preset("v3");
  ops.rope = rope;
  ops.execution = Execution::Eager;
  return ops;
}

// One forward and backward of each model, from the same weights over the
// same batch. Under fp16 every model takes the same loss scale (the
// reference too, as gpu_model_test.cc), so their gradients scale alike.
inline void step_each(std::initializer_list<Model*> models, const std::vector<double>& w,
                      const std::vector<std::int32_t>& batch, DType t) {
  const bool scaled = t == DType::F16;
  for (Model* m : models) {
    m->set_params(w);
    m->set_batch(batch);
    m->forward();
    m->backward(scaled ? 1024.0f : 1.0f, scaled);
  }
}

}  // namespace tinyllama::gpu_test
