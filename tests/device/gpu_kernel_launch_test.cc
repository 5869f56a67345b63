// KernelLaunch::Pdl (programmatic dependent launch, device/cuda_launch.cuh)
// changes when a kernel may start, never what it computes: whole training
// steps with every kernel of the step launched programmatically give the
// losses, weights and AdamW moments of plain launches bit for bit, eagerly
// and replayed from a captured graph, in fp32, bf16 and fp16. A kernel that
// read its predecessor's output before its pdl_wait_previous() could read
// it half-written, which would show as changed bits (not on every run: a
// race may go unseen, so these tests back the rule, they do not replace it).
//
// The op families are reached through the model, back to back on the
// backend's streams as a step issues them: v4 itself (fused norms, the
// chunked loss's fused cross-entropy, RoPE, the sorted embedding gradient,
// flash attention with the fused RoPE backward, the per-layer AdamW sweeps
// on their side stream), every level and every single change of one
// (materialised attention, separate SwiGLU, plain norms, full-logits
// cross-entropy, per-tensor AdamW and the convert pass, the scan embedding
// gradient, recomputed norms and SwiGLU, cuDNN's attention), the two
// injected faults that have kernels of their own (naive_linear,
// strided_kv_attention), and each flash forward and backward kernel pinned.
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/gpu_model_util.h"
#include "cuda/gpu_test_util.h"
#include "device/cuda_launch.h"
#include "model/model.h"
#include "model/same_bits.h"
#include "ops/attention/flash/flash_attention.h"
#include "train/step_runner.h"

namespace tinyllama::gpu_test {
namespace {

// head_dim 64, rows of 16 bytes and more: the Hopper flash kernels run
// under bf16 and fp16. 130 positions: two 64-row tiles and a ragged third.
ModelConfig hopper_sized() {
  ModelConfig c;
  c.vocab_size = 203;
  c.hidden_dim = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 320;
  return c;
}

constexpr BatchShape kShape{3, 130};

struct Trajectory {
  std::vector<double> losses;
  std::vector<std::vector<double>> params, m, v;  // after each step
  bool replaying = false;
  std::string note;
  std::string plan;
};

// `steps` whole steps through the trainer's StepRunner (step 1 eager, then
// the captured graph's replays where the plan captures).
Trajectory train(OpChoices ops, KernelLaunch launch, DType t, const InjectedFaults& faults,
                 int steps, const KernelPins& pins) {
  const ModelConfig cfg = hopper_sized();
  const std::unique_ptr<Backend> backend = make_cuda_backend(precision_for(t));
  ops.kernel_launch = launch;
  StepPlan plan =
      test_plan(ops, precision_for(t), *backend, cfg, kShape, /*keep_grad_ring=*/true, pins);
  plan.faults = faults;
  EXPECT_EQ(plan.ops.kernel_launch, launch) << "an sm_90 device takes PDL: " << plan.describe();
  Model model(cfg, kShape, plan, *backend);
  model.set_params(weights(model.layout()));
  LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic, 1024.0, 2000);
  AdamWHyper hp;
  hp.lr = 1e-2f;
  StepRunner runner(model, scaler, hp);
  Trajectory out;
  out.plan = plan.describe();
  for (int i = 0; i < steps; ++i) {
    const StepRecord r = runner.run(
        random_rows(kShape.batch, kShape.seq, cfg.vocab_size, 700 + static_cast<std::uint64_t>(i)));
    out.losses.push_back(r.loss);
    out.params.push_back(model.params());
    out.m.push_back(model.adam_m());
    out.v.push_back(model.adam_v());
  }
  out.replaying = runner.replaying();
  out.note = runner.note();
  return out;
}

// Plain, then PDL, of the same choices: the same bits after every step.
void expect_pdl_is_plain(const OpChoices& ops, DType t, const InjectedFaults& faults, int steps,
                         const std::string& what, const KernelPins& pins = {}) {
  SCOPED_TRACE(what + " " + dtype_label(t));
  const Trajectory plain = train(ops, KernelLaunch::Plain, t, faults, steps, pins);
  const Trajectory pdl = train(ops, KernelLaunch::Pdl, t, faults, steps, pins);
  EXPECT_EQ(pdl.replaying, plain.replaying) << pdl.note;
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    const auto k = static_cast<std::size_t>(s);
    EXPECT_EQ(std::memcmp(&plain.losses[k], &pdl.losses[k], sizeof(double)), 0)
        << "loss " << pdl.losses[k] << " vs plain " << plain.losses[k];
    EXPECT_TRUE(same_bits(plain.params[k], pdl.params[k])) << "weights differ";
    EXPECT_TRUE(same_bits(plain.m[k], pdl.m[k])) << "first moments differ";
    EXPECT_TRUE(same_bits(plain.v[k], pdl.v[k])) << "second moments differ";
  }
  EXPECT_FALSE(same_bits(pdl.params.front(), pdl.params.back())) << "the steps moved nothing";
  std::cout << "[ pdl      ] " << what << " " << dtype_label(t) << " ("
            << (pdl.replaying ? "replayed" : "eager") << "): " << pdl.plan << "\n";
}

// attention auto times flash against cuDNN in each run, and two runs may
// choose differently; the kernels PDL changes are ours.
OpChoices v4_with_flash(Execution execution) {
  OpChoices ops = level_preset("v4");
  ops.attention = AttentionImpl::Flash;
  ops.execution = execution;
  return ops;
}

// Skips (loudly) without a device, or on one that takes no PDL.
template <typename Base>
class WithPdl : public Base {
 protected:
  void SetUp() override {
    Base::SetUp();
    if (this->IsSkipped()) return;
    const std::string why = cuda::programmatic_launch_unsupported();
    if (!why.empty()) GTEST_SKIP() << "this device or build has no PDL: " << why;
  }
};

using StepParam = std::tuple<DType, Execution>;

class GpuKernelLaunchSteps : public WithPdl<GpuParamTest<StepParam>> {};

TEST_P(GpuKernelLaunchSteps, V4StepsWithPdlAreBitIdenticalToPlainOnes) {
  const auto [t, execution] = GetParam();
  expect_pdl_is_plain(v4_with_flash(execution), t, InjectedFaults{}, 4,
                      std::string("v4 ") + impl_name(execution));
}

INSTANTIATE_TEST_SUITE_P(PrecisionsAndExecutions, GpuKernelLaunchSteps,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values(Execution::Graph, Execution::Eager)),
                         [](const auto& info) {
                           return dtype_label(std::get<0>(info.param)) + "_" +
                                  impl_name(std::get<1>(info.param));
                         });

class GpuKernelLaunchFamilies : public WithPdl<GpuTest> {};

// Every level and every single change of one (each op family the plans
// reach), two steps each, as the variant executes (eager or replayed): in
// bf16, and each level in fp32 too.
TEST_F(GpuKernelLaunchFamilies, EveryLevelAndSingleChangeIsBitIdentical) {
  for (const PlanVariant& v : level_variants()) {
    if (v.name.find("kernel_launch") != std::string::npos) continue;  // both are run anyway
    OpChoices ops = v.ops;
    // auto's timing may choose differently in two runs; cudnn has variants of its own.
    if (ops.attention == AttentionImpl::Auto) ops.attention = AttentionImpl::Flash;
    expect_pdl_is_plain(ops, DType::BF16, InjectedFaults{}, 2, v.name);
    // fp32's own kernels (the fp32 flash family among them) at each level;
    // its single changes reach the same kernels in bf16 above.
    if (v.name.find(' ') == std::string::npos) {
      expect_pdl_is_plain(ops, DType::F32, InjectedFaults{}, 2, v.name);
    }
  }
}

// The exercise faults' own kernels: naive_linear for the gate/up
// projections, the uncoalesced attention forward.
TEST_F(GpuKernelLaunchFamilies, TheInjectedFaultsKernelsAreBitIdentical) {
  InjectedFaults naive;
  naive.naive_swiglu = true;
  InjectedFaults strided;
  strided.noncontiguous_kv = true;
  for (const DType t : {DType::F32, DType::BF16}) {
    for (const Execution e : {Execution::Graph, Execution::Eager}) {
      expect_pdl_is_plain(v4_with_flash(e), t, naive, 2, "naive-swiglu");
      expect_pdl_is_plain(v4_with_flash(e), t, strided, 2, "noncontiguous-kv");
    }
  }
}

// Each flash kernel family, pinned: mma.sync, wgmma (one and two
// warpgroups, paired heads, overlapped softmax), warp-specialised (TMA),
// and the backward's four.
TEST_F(GpuKernelLaunchFamilies, EachFlashKernelIsBitIdentical) {
  const std::pair<FlashForwardKernel, FlashBackwardKernel> pins[] = {
      {FlashForwardKernel::Mma, FlashBackwardKernel::Mma},
      {FlashForwardKernel::Wgmma1x64, FlashBackwardKernel::Wgmma},
      {FlashForwardKernel::Wgmma2x128, FlashBackwardKernel::Specialized},
      {FlashForwardKernel::Paired2x64, FlashBackwardKernel::Wgmma},
      {FlashForwardKernel::Overlap2x64, FlashBackwardKernel::Specialized},
      {FlashForwardKernel::Specialized64, FlashBackwardKernel::Wgmma},
      {FlashForwardKernel::PingPong128, FlashBackwardKernel::Specialized},
      {FlashForwardKernel::Paired2x128, FlashBackwardKernel::Fused}};
  int i = 0;
  for (const auto& [forward, backward] : pins) {
    KernelPins pinned;
    pinned.flash_forward = forward;
    pinned.flash_backward = backward;
    for (const DType t : {DType::BF16, DType::F16}) {
      expect_pdl_is_plain(v4_with_flash(Execution::Graph), t, InjectedFaults{}, 2,
                          "flash pin " + std::to_string(i), pinned);
    }
    ++i;
  }
}

// The setting belongs to the streams a backend owns: another backend in the
// same process, and a stream of nobody's, keep plain launches; a backend's
// streams are forgotten when it goes.
TEST_F(GpuKernelLaunchFamilies, PdlIsSetPerBackendStream) {
  const ModelConfig cfg = hopper_sized();
  OpChoices ops = v4_with_flash(Execution::Graph);
  const std::unique_ptr<Backend> plain = make_cuda_backend(Precision::fp32());
  ops.kernel_launch = KernelLaunch::Plain;
  plain->prepare(cfg, kShape, test_plan(ops, Precision::fp32(), *plain, cfg, kShape));
  void* plain_stream = plain->main_stream_handle();
  void* pdl_stream = nullptr;
  {
    const std::unique_ptr<Backend> pdl = make_cuda_backend(Precision::fp32());
    ops.kernel_launch = KernelLaunch::Pdl;
    pdl->prepare(cfg, kShape, test_plan(ops, Precision::fp32(), *pdl, cfg, kShape));
    pdl_stream = pdl->main_stream_handle();
    ASSERT_NE(pdl_stream, nullptr);
    ASSERT_NE(plain_stream, nullptr);
    EXPECT_TRUE(cuda::programmatic_launch(static_cast<cudaStream_t>(pdl_stream)));
    EXPECT_FALSE(cuda::programmatic_launch(static_cast<cudaStream_t>(plain_stream)));
    EXPECT_FALSE(cuda::programmatic_launch(nullptr));
  }
  EXPECT_FALSE(cuda::programmatic_launch(static_cast<cudaStream_t>(pdl_stream)))
      << "a destroyed backend's stream handle may be reused";
}

}  // namespace
}  // namespace tinyllama::gpu_test
