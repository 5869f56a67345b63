// A whole training step of the model on the CUDA backend against the CPU
// backend in float64, from the same weights and batch: the loss, every
// parameter's gradient and the parameters after one AdamW step (DESIGN §2:
// every level must produce the reference's gradients within the precision's
// tolerance).
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "cpu/cpu_backend.h"
#include "gpu_model_util.h"
#include "gpu_test_util.h"
#include "model/init.h"
#include "model/model.h"

namespace tinyllama::gpu_test {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 97;
  c.hidden_dim = 128;  // head_dim 32
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 100;
  return c;
}

using ModelParam = std::tuple<DType, int>;  // (compute dtype, seq)

class GpuModelStep : public GpuParamTest<ModelParam> {};

TEST_P(GpuModelStep, LevelV1MatchesCpuReference) {
  const auto [t, seq] = GetParam();
  const ModelConfig cfg = small_config();
  const BatchShape shape{3, seq};
  CpuBackend cpu_backend;
  Model ref(cfg, shape, test_plan("v1", Precision::fp64(), cpu_backend, cfg, shape), cpu_backend);
  const std::unique_ptr<Backend> gpu_backend = make_cuda_backend(precision_for(t));
  Model gpu(cfg, shape, test_plan("v1", precision_for(t), *gpu_backend, cfg, shape), *gpu_backend);

  const std::vector<double> w = weights(ref.layout());
  const std::vector<std::int32_t> batch = random_rows(shape.batch, shape.seq, cfg.vocab_size, 5);
  for (Model* m : {&ref, &gpu}) {
    m->set_params(w);
    m->set_batch(batch);
    m->forward();
  }
  // Whole-model tolerances on each gradient tensor's relative 2-norm error:
  // fp32 compounds a few layers of fp32 rounding; AMP compounds bf16/fp16
  // activations through every op.
  const double tol = low_precision(t) ? 5e-2 : 1e-4;
  EXPECT_NEAR(gpu.loss(), ref.loss(), (low_precision(t) ? 1e-2 : 1e-5) * ref.loss());

  // fp16 runs with a loss scale and the overflow scan, as the trainer does;
  // the optimizer step then divides the scale out.
  const bool scaled = t == DType::F16;
  const float loss_scale = scaled ? 1024.0f : 1.0f;
  ref.backward(loss_scale, scaled);
  gpu.backward(loss_scale, scaled);
  EXPECT_FALSE(gpu.overflowed());
  const auto [grad_err, grad_slot] = worst_slot(ref.layout(), gpu.grads(), ref.grads());
  EXPECT_LE(grad_err, tol) << "worst gradient: " << grad_slot;

  AdamWHyper hp;
  hp.step = 1;
  const std::vector<double> ref_grads = ref.grads();
  ref.optimizer_step(hp);
  gpu.optimizer_step(hp);
  // AdamW's first step moves each weight by about lr * sign(grad) (plus the
  // decay), so it is compared only where the reference gradient is large
  // enough (a tenth of its tensor's largest) for its sign to be certain.
  const std::vector<double> ref_after = ref.params();
  const std::vector<double> gpu_after = gpu.params();
  double worst_move = 0;
  std::string move_slot;
  for (const ParamSlot& s : ref.layout().slots()) {
    double gmax = 0;
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      gmax = std::max(gmax, std::abs(ref_grads[static_cast<std::size_t>(s.offset + i)]));
    }
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      const auto k = static_cast<std::size_t>(s.offset + i);
      if (std::abs(ref_grads[k]) < 0.1 * gmax) continue;
      const double ref_move = ref_after[k] - w[k];
      const double gpu_move = gpu_after[k] - static_cast<double>(static_cast<float>(w[k]));
      const double rel = std::abs(gpu_move - ref_move) / hp.lr;
      if (!(rel <= worst_move)) {
        worst_move = rel;
        move_slot = s.name;
      }
    }
  }
  EXPECT_LE(worst_move, 1e-2) << "AdamW step (relative to lr) worst in " << move_slot;
}

std::string model_name(const ::testing::TestParamInfo<ModelParam>& info) {
  const auto [t, seq] = info.param;
  return dtype_label(t) + "_S" + std::to_string(seq);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuModelStep,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values(1, 33)),
                         model_name);

}  // namespace
}  // namespace tinyllama::gpu_test
