// Whole-step CUDA graphs (issue 4 items 4 and 5):
//  * a run whose steps replay one captured graph trains exactly like the
//    eager run -- losses, loss scales, skipped fp16 steps and parameters --
//    so nothing that changes between steps was baked into the capture;
//  * each level, and each level with one plan choice changed, run through
//    the trainer's StepRunner (so a Graph plan really captures), gives the CPU reference's
//    loss and gradients;
//  * a capture broken by a host synchronisation is discarded cleanly and
//    leaves the device usable for eager work.
#include <cfloat>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cuda/gpu_model_util.h"
#include "cuda/gpu_test_util.h"
#include "model/model.h"
#include "train/step_runner.h"

namespace tinyllama::gpu_test {
namespace {

// Awkward on purpose: S and vocab prime, B odd, F not a multiple of 64.
// head_dim 32 is the smallest the flash kernels support (32/64/96/128).
ModelConfig awkward_config(int kv_heads, int head_dim = 32) {
  ModelConfig c;
  c.vocab_size = 101;
  c.hidden_dim = 6 * head_dim;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = kv_heads;
  c.ffn_dim = 200;
  return c;
}

constexpr BatchShape kShape{3, 37};

struct GpuRun {
  std::vector<StepRecord> steps;
  std::vector<double> params;
  bool replaying = false;
  bool capture_failed = false;
  std::string note;
  std::optional<GraphStats> launches;
  int applied_updates = 0;
  int most_in_flight = 0;
};

// `steps` training steps on the GPU from the shared weights and batches;
// with `ahead`, each step is launched before the last one is finished, as
// the trainer does.
GpuRun train_on_gpu(DType t, const std::string& level, bool graphs, int steps, double initial_scale,
                    bool ahead = false, const KernelPins& pins = {}) {
  const ModelConfig cfg = awkward_config(3);
  const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
  OpChoices ops = level_preset(level);
  ops.execution = graphs ? Execution::Graph : Execution::Eager;
  const StepPlan plan = test_plan(ops, precision_for(t), *backend, cfg, kShape, false, pins);
  Model model(cfg, kShape, plan, *backend);
  model.set_params(weights(model.layout()));
  LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic, initial_scale, 2000);
  AdamWHyper hp;
  hp.lr = 1e-3f;
  StepRunner runner(model, scaler, hp);
  GpuRun out;
  for (int i = 0; i < steps; ++i) {
    const std::vector<std::int32_t> rows =
        random_rows(kShape.batch, kShape.seq, cfg.vocab_size, 100 + static_cast<std::uint64_t>(i));
    if (!ahead) {
      out.steps.push_back(runner.run(rows));
      continue;
    }
    while (!runner.can_launch()) out.steps.push_back(runner.finish());
    runner.launch(rows);
    out.most_in_flight = std::max(out.most_in_flight, runner.in_flight());
  }
  while (runner.in_flight() > 0) out.steps.push_back(runner.finish());
  if (!runner.replaying()) runner.count_launches();
  out.params = model.params();
  out.replaying = runner.replaying();
  out.capture_failed = runner.capture_failed();
  out.note = runner.note();
  out.launches = runner.launches();
  out.applied_updates = runner.applied_updates();
  return out;
}

// Where a norm's grid is too large for the in-kernel sum of its weight
// gradient, the second kernel runs on the side branch, beside the rest of
// the backward pass (CudaBackend::norm_backward). With that kernel forced
// at every norm: the same bits as the in-kernel sum, replayed at every
// level with parallel branches.
TEST_F(GpuTest, NormWeightSumsOnTheSideBranchKeepTheBits) {
  KernelPins second;
  second.norm_weight_sum = NormWeightSum::SecondKernel;
  for (const char* level : {"v2", "v3", "v4"}) {
    SCOPED_TRACE(level);
    const GpuRun in_kernel = train_on_gpu(DType::BF16, level, true, 4, 65536.0);
    const GpuRun side = train_on_gpu(DType::BF16, level, true, 4, 65536.0, false, second);
    ASSERT_TRUE(in_kernel.replaying && side.replaying) << in_kernel.note << side.note;
    ASSERT_TRUE(in_kernel.launches.has_value() && side.launches.has_value());
    EXPECT_GT(side.launches->kernels, in_kernel.launches->kernels) << "the second kernels ran";
    EXPECT_EQ(side.params, in_kernel.params);
  }
}

using GraphParam = std::tuple<DType, bool>;  // (compute dtype, v2 toggles or v1)

class GpuGraphRun : public GpuParamTest<GraphParam> {};

// Replays must equal eager steps. The kernels are deterministic (no atomics),
// so the runs should agree bit for bit; 1e-6 relative is the contract.
TEST_P(GpuGraphRun, ReplayedStepsMatchEagerSteps) {
  const auto [t, v2] = GetParam();
  const std::string level = v2 ? "v2" : "v1";
  // fp16: an initial scale so large that the first steps overflow (the
  // cross-entropy gradient alone is 2^24 / 111 > fp16's 65504), so skipped
  // steps happen inside replays, then the halved scale trains normally.
  const double initial_scale = t == DType::F16 ? std::ldexp(1.0, 24) : 65536.0;
  const int steps = 8;
  const GpuRun eager = train_on_gpu(t, level, false, steps, initial_scale);
  const GpuRun graphed = train_on_gpu(t, level, true, steps, initial_scale);

  ASSERT_TRUE(graphed.replaying) << "the graph run did not replay: " << graphed.note;
  ASSERT_FALSE(eager.replaying);
  ASSERT_TRUE(graphed.launches.has_value());
  ASSERT_TRUE(eager.launches.has_value()) << "eager launch count missing";
  // The same kernels, except that a captured v2 step sweeps each layer's
  // AdamW state beside the backward pass (and the rest after it) where the
  // eager step sweeps the whole block once.
  const ParamLayout sweeps(awkward_config(3));
  const int extra_sweeps =
      v2 && t != DType::F16  // fp16 sweeps once, after the overflow scan
          ? awkward_config(3).num_layers + static_cast<int>(sweeps.non_layer_spans().size()) - 1
          : 0;
  EXPECT_EQ(graphed.launches->kernels, eager.launches->kernels + extra_sweeps)
      << "the captured step and the eager step must launch the same kernels";
  std::cout << "[ graph    ] " << dtype_label(t) << (v2 ? " v2" : " v1") << ": "
            << graphed.launches->kernels << " kernels, " << graphed.launches->memsets
            << " memsets, " << graphed.launches->memcpys << " memcpys per step\n";

  bool identical = true;
  for (int i = 0; i < steps; ++i) {
    const StepRecord& e = eager.steps[static_cast<std::size_t>(i)];
    const StepRecord& g = graphed.steps[static_cast<std::size_t>(i)];
    EXPECT_EQ(g.skipped, e.skipped) << "step " << i + 1;
    EXPECT_EQ(g.loss_scale, e.loss_scale) << "step " << i + 1;
    EXPECT_NEAR(g.loss, e.loss, 1e-6 * std::abs(e.loss)) << "step " << i + 1;
    identical = identical && g.loss == e.loss;
    // The phase split is measured inside the graph (event-record nodes).
    EXPECT_TRUE(std::isfinite(g.forward_ms) && g.forward_ms > 0) << "step " << i + 1;
    EXPECT_TRUE(std::isfinite(g.backward_ms) && g.backward_ms > 0) << "step " << i + 1;
    EXPECT_TRUE(std::isfinite(g.optimizer_ms) && g.optimizer_ms > 0) << "step " << i + 1;
  }
  const ParamLayout layout(awkward_config(3));
  const auto [err, slot] = worst_slot(layout, graphed.params, eager.params);
  EXPECT_LE(err, 1e-6) << "parameters after " << steps << " steps, worst in " << slot;
  identical = identical && graphed.params == eager.params;
  std::cout << "[ graph    ] bit-identical to eager: " << (identical ? "yes" : "no") << "\n";
  EXPECT_EQ(graphed.applied_updates, eager.applied_updates);

  if (t == DType::F16) {
    int skipped_replays = 0;
    for (int i = 1; i < steps; ++i) {
      const StepRecord& prev = graphed.steps[static_cast<std::size_t>(i - 1)];
      const StepRecord& r = graphed.steps[static_cast<std::size_t>(i)];
      if (prev.skipped) EXPECT_EQ(r.loss_scale, prev.loss_scale / 2) << "step " << i + 1;
      skipped_replays += r.skipped ? 1 : 0;
    }
    EXPECT_TRUE(graphed.steps.front().skipped) << "2^24 must overflow fp16";
    EXPECT_GE(skipped_replays, 1) << "no replayed step overflowed";
    int applied = 0;
    for (const StepRecord& r : graphed.steps) applied += r.skipped ? 0 : 1;
    EXPECT_GE(applied, 1) << "every step overflowed";
    EXPECT_EQ(graphed.applied_updates, applied) << "a skipped step advanced AdamW's count";
  }
}

// The trainer launches step n+1 before it reads step n's loss: each step in
// flight replays its own graph slot and reads back its own losses, so the
// run must equal one that waits for every step.
TEST_P(GpuGraphRun, StepsLaunchedAheadMatchStepsRunOneAtATime) {
  const auto [t, v2] = GetParam();
  const std::string level = v2 ? "v2" : "v1";
  const double initial_scale = t == DType::F16 ? std::ldexp(1.0, 24) : 65536.0;
  const int steps = 7;
  for (const bool graphs : {true, false}) {
    const GpuRun waited = train_on_gpu(t, level, graphs, steps, initial_scale);
    const GpuRun ahead = train_on_gpu(t, level, graphs, steps, initial_scale, /*ahead=*/true);
    EXPECT_EQ(ahead.replaying, graphs) << ahead.note;
    // fp16's loss scale of each step depends on the step before it.
    EXPECT_EQ(ahead.most_in_flight, t == DType::F16 ? 1 : kGraphSlots);
    ASSERT_EQ(ahead.steps.size(), waited.steps.size());
    for (int i = 0; i < steps; ++i) {
      const StepRecord& w = waited.steps[static_cast<std::size_t>(i)];
      const StepRecord& a = ahead.steps[static_cast<std::size_t>(i)];
      EXPECT_EQ(a.skipped, w.skipped) << "step " << i + 1;
      EXPECT_EQ(a.loss_scale, w.loss_scale) << "step " << i + 1;
      EXPECT_NEAR(a.loss, w.loss, 1e-6 * std::abs(w.loss)) << "step " << i + 1;
      EXPECT_TRUE(std::isfinite(a.forward_ms) && a.forward_ms > 0) << "step " << i + 1;
      EXPECT_TRUE(std::isfinite(a.optimizer_ms) && a.optimizer_ms > 0) << "step " << i + 1;
    }
    const ParamLayout layout(awkward_config(3));
    const auto [err, slot] = worst_slot(layout, ahead.params, waited.params);
    EXPECT_LE(err, 1e-6) << "graphs " << graphs << ": parameters, worst in " << slot;
    EXPECT_EQ(ahead.applied_updates, waited.applied_updates);
  }
}

std::string graph_name(const ::testing::TestParamInfo<GraphParam>& info) {
  const auto [t, v2] = info.param;
  return dtype_label(t) + (v2 ? "_v2" : "_v1");
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuGraphRun,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()), ::testing::Bool()),
                         graph_name);

// (index into level_variants(): each level and each single change of it,
// kv heads, compute dtype, head_dim)
using ComboParam = std::tuple<int, int, DType, int>;

class GpuToggleCombo : public GpuParamTest<ComboParam> {};

// Step 2 of a StepRunner run (step 1 eager; with cuda_graphs step 2 is the
// captured graph's first replay) against the CPU reference in float64 on
// the same batch. lr 0 keeps the weights where both sides started, so the
// comparison is of one step's loss and gradients, not of two trajectories.
TEST_P(GpuToggleCombo, LossAndGradientsMatchTheCpuReference) {
  const auto [index, kv_heads, t, head_dim] = GetParam();
  const PlanVariant variant = level_variants()[static_cast<std::size_t>(index)];
  const ModelConfig cfg = awkward_config(kv_heads, head_dim);

  const std::unique_ptr<Backend> gpu_backend = make_cuda_backend(precision_for(t));
  const StepPlan plan = test_plan(variant.ops, precision_for(t), *gpu_backend, cfg, kShape);
  Model gpu(cfg, kShape, plan, *gpu_backend);
  const std::vector<double> w = weights(gpu.layout());
  gpu.set_params(w);
  LossScaler scaler(false);
  AdamWHyper hp;
  hp.lr = 0.0f;
  StepRunner runner(gpu, scaler, hp);
  runner.run(random_rows(kShape.batch, kShape.seq, cfg.vocab_size, 1));
  const std::vector<std::int32_t> batch = random_rows(kShape.batch, kShape.seq, cfg.vocab_size, 2);
  const StepRecord r = runner.run(batch);
  EXPECT_EQ(runner.replaying(), plan.captured()) << runner.note();

  CpuBackend cpu_backend;
  Model ref(cfg, kShape, test_plan(variant.ops, Precision::fp64(), cpu_backend, cfg, kShape),
            cpu_backend);
  ref.set_params(w);
  ref.set_batch(batch);
  ref.forward();
  ref.backward();

  // The precision's tolerance (fp32 1e-5, bf16/fp16 2e-2), relative: for the
  // loss to the loss, for each gradient tensor as a relative 2-norm.
  const double tol = tolerance(t);
  const double loss_err = std::abs(r.loss - ref.loss()) / ref.loss();
  const auto [grad_err, grad_slot] = worst_slot(ref.layout(), gpu.grads(), ref.grads());
  std::cout << "[ combo    ] " << variant.name << " (" << plan.describe() << ") K" << kv_heads
            << " " << dtype_label(t) << ": loss rel err " << loss_err << ", worst grad rel err "
            << grad_err << " (" << grad_slot << ")\n";
  EXPECT_LE(loss_err, tol) << "loss " << r.loss << " vs reference " << ref.loss();
  EXPECT_LE(grad_err, tol) << "worst gradient: " << grad_slot;
}

std::string combo_name(const ::testing::TestParamInfo<ComboParam>& info) {
  const auto [index, kv, t, head_dim] = info.param;
  std::string name = level_variants()[static_cast<std::size_t>(index)].name;
  for (char& c : name) {
    if (c == ' ' || c == '=') c = '_';
  }
  return name + "_K" + std::to_string(kv) + "_" + dtype_label(t) +
         (head_dim != 32 ? "_hd" + std::to_string(head_dim) : "");
}

INSTANTIATE_TEST_SUITE_P(
    LevelsAndSingleChanges, GpuToggleCombo,
    ::testing::Combine(::testing::Range(0, static_cast<int>(level_variants().size())),
                       ::testing::Values(2, 3), ::testing::Values(DType::F32, DType::BF16),
                       ::testing::Values(32)),
    combo_name);

// head_dim 96, which only the mma.sync and fp32 flash kernels run: each
// level (the first entries of level_variants()) at GQA 2 and 3.
INSTANTIATE_TEST_SUITE_P(
    LevelsAtHeadDim96, GpuToggleCombo,
    ::testing::Combine(::testing::Range(0, static_cast<int>(implemented_levels().size())),
                       ::testing::Values(2, 3), ::testing::Values(DType::F32, DType::BF16),
                       ::testing::Values(96)),
    combo_name);

class GpuGraphCapture : public GpuTest {};

// A host synchronisation inside a capture fails it; the recording is
// discarded and the error cleared, so eager work (and its launch checks)
// goes on as if nothing happened.
TEST_F(GpuGraphCapture, ABrokenCaptureLeavesTheDeviceUsable) {
  Harness h(DType::F32);
  Twin x = h.input(4, 33, DType::F32);
  Twin y = h.input(4, 33, DType::F32);
  Twin out = h.output(4, 33, DType::F32);

  h.gpu().begin_capture();
  h.gpu().add(out.gpu, x.gpu, y.gpu);
  EXPECT_THROW(h.gpu().synchronize(), RuntimeFailure);
  h.gpu().abort_capture();

  h.gpu().begin_capture();
  std::int32_t value = 7;
  EXPECT_THROW(h.gpu().upload_async(out.gpu.data, &value, sizeof value), RuntimeFailure)
      << "a per-step upload inside a capture would be baked into the graph";
  h.gpu().abort_capture();

  h.gpu().add(out.gpu, x.gpu, y.gpu);  // its launch check must not see a stale error
  for (std::int64_t r = 0; r < 4; ++r) {
    for (std::int64_t c = 0; c < 33; ++c) {
      out.cpu.ptr<double>()[r * out.cpu.ld + c] =
          x.cpu.ptr<double>()[r * x.cpu.ld + c] + y.cpu.ptr<double>()[r * y.cpu.ld + c];
    }
  }
  h.expect_close(out, tolerance(DType::F32), "add after a failed capture");
}

// Without instantiating, a capture only counts: nothing it recorded runs.
TEST_F(GpuGraphCapture, CountingACaptureRunsNothing) {
  Harness h(DType::F32);
  Twin x = h.input(2, 5, DType::F32);
  Twin out = h.output(2, 5, DType::F32);
  h.gpu().begin_capture();
  h.gpu().add(out.gpu, x.gpu, x.gpu);
  h.gpu().fill_zero(x.gpu.data, sizeof(float));
  const GraphStats s = h.gpu().end_capture(/*instantiate=*/false, /*slot=*/0);
  EXPECT_EQ(s.kernels, 1);
  EXPECT_EQ(s.memsets, 1);
  const std::vector<double> v = h.device_values(out.gpu);
  for (double e : v) EXPECT_TRUE(std::isnan(e)) << "the counted capture ran";
}

}  // namespace
}  // namespace tinyllama::gpu_test
