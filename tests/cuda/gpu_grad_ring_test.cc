// GradBuffers::Ring on the GPU (issue 16 item 4): whole steps replayed from
// one captured graph, with the weight-gradient GEMMs and the per-layer AdamW
// sweeps on parallel branches, give the weights and AdamW moments of the
// full gradient bit for bit, step after step. Four layers, so each of the
// two slots is reused within a step: a missing edge from a layer's sweep to
// the weight-gradient GEMMs of the layer two below (which overwrite the
// slot) would let the sweep read the wrong layer's gradient. The CPU
// counterpart, with the side work deferred, is tests/model/grad_ring_test.cc.
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_model_util.h"
#include "gpu_test_util.h"
#include "model/model.h"
#include "model/same_bits.h"
#include "train/options.h"
#include "train/run_setup.h"
#include "train/step_runner.h"

namespace tinyllama::gpu_test {
namespace {

ModelConfig four_layers() {
  ModelConfig c;
  c.vocab_size = 101;
  c.hidden_dim = 128;
  c.num_layers = 4;
  c.num_heads = 4;  // head_dim 32, which the flash kernels support
  c.num_kv_heads = 2;
  c.ffn_dim = 200;
  return c;
}

constexpr BatchShape kShape{3, 37};
constexpr int kSteps = 5;

struct RingRun {
  std::vector<std::vector<double>> params, m, v;  // after each step
  bool replaying = false;
  std::string note;
  MemoryBreakdown memory;
};

// kSteps whole steps through the trainer's StepRunner (captured once, then
// replayed), the state read back after each.
RingRun train(DType t, const std::string& level, GradBuffers buffers) {
  const ModelConfig cfg = four_layers();
  const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
  OpChoices ops = level_preset(level);
  ops.grad_buffers = buffers;
  const StepPlan plan =
      test_plan(ops, precision_for(t), *backend, cfg, kShape, /*keep_grad_ring=*/true);
  EXPECT_EQ(plan.ops.grad_buffers, buffers) << plan.describe();
  EXPECT_EQ(plan.ops.optimizer, OptimizerImpl::FusedPerLayer) << plan.describe();
  EXPECT_TRUE(plan.parallel_branches) << plan.describe();
  Model model(cfg, kShape, plan, *backend);
  model.set_params(weights(model.layout()));
  LossScaler scaler(false);
  AdamWHyper hp;
  hp.lr = 1e-2f;
  StepRunner runner(model, scaler, hp);
  RingRun out;
  for (int i = 0; i < kSteps; ++i) {
    runner.run(
        random_rows(kShape.batch, kShape.seq, cfg.vocab_size, 300 + static_cast<std::uint64_t>(i)));
    out.params.push_back(model.params());
    out.m.push_back(model.adam_m());
    out.v.push_back(model.adam_v());
  }
  out.replaying = runner.replaying();
  out.note = runner.note();
  out.memory = model.memory();
  return out;
}

using RingParam = std::tuple<DType, std::string>;  // (compute dtype, level)

class GpuGradRing : public GpuParamTest<RingParam> {};

TEST_P(GpuGradRing, ReplayedRingStepsGiveTheFullGradientsWeightsBitForBit) {
  const auto [t, level] = GetParam();
  const RingRun full = train(t, level, GradBuffers::Full);
  const RingRun ring = train(t, level, GradBuffers::Ring);
  ASSERT_TRUE(full.replaying) << full.note;
  ASSERT_TRUE(ring.replaying) << "the ring run did not replay a captured graph: " << ring.note;
  for (int s = 0; s < kSteps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    const auto k = static_cast<std::size_t>(s);
    EXPECT_TRUE(same_bits(full.params[k], ring.params[k])) << "weights differ";
    EXPECT_TRUE(same_bits(full.m[k], ring.m[k])) << "first moments differ";
    EXPECT_TRUE(same_bits(full.v[k], ring.v[k])) << "second moments differ";
  }
  EXPECT_FALSE(same_bits(ring.params.front(), ring.params.back())) << "the steps moved nothing";
  const ParamLayout layout(four_layers());
  EXPECT_EQ(full.memory.gradients - ring.memory.gradients, 2 * layout.layer_span(0).size() * 4);
  std::cout << "[ ring     ] " << dtype_label(t) << " " << level << ": gradients "
            << full.memory.gradients << " -> " << ring.memory.gradients << " bytes\n";
}

INSTANTIATE_TEST_SUITE_P(PrecisionsAndLevels, GpuGradRing,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(std::string("v2"),
                                                              std::string("v3"))),
                         [](const auto& info) {
                           return dtype_label(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

// resolve_run on a device where the ring runs: kept for a plain run, full
// with the reader's reason for each run that reads the whole gradient.
TEST(GpuGradRingRun, ReadersOfTheWholeGradientFallBackToFull) {
  if (!cuda_device_available()) GTEST_SKIP() << kSkipMessage;
  auto resolved = [](const std::function<void(TrainOptions&)>& set) {
    TrainOptions o;
    o.model = four_layers();
    o.shape = kShape;
    o.request.ops.grad_buffers = GradBuffers::Ring;
    o.request.precision = Precision::amp(DType::BF16);
    o.device_request = DeviceKind::Cuda;
    set(o);
    resolve_run(o);
    return o.plan;
  };
  const StepPlan plain = resolved([](TrainOptions&) {});
  EXPECT_EQ(plain.ops.grad_buffers, GradBuffers::Ring) << plain.describe();
  const StepPlan dump = resolved([](TrainOptions& o) { o.dump_dir = "unused"; });
  EXPECT_EQ(dump.ops.grad_buffers, GradBuffers::Full);
  ASSERT_FALSE(dump.fallbacks.empty());
  EXPECT_NE(dump.fallbacks.back().reason.find("--dump-dir"), std::string::npos);
  const StepPlan setup = resolved([](TrainOptions& o) { o.validate_setup = true; });
  EXPECT_EQ(setup.ops.grad_buffers, GradBuffers::Full);
  ASSERT_FALSE(setup.fallbacks.empty());
  EXPECT_NE(setup.fallbacks.back().reason.find("--validate-setup"), std::string::npos);
}

}  // namespace
}  // namespace tinyllama::gpu_test
