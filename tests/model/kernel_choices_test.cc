// resolve_kernels: the kernel families a plan runs, from the device's facts
// and the shapes (flash attention's forward and backward, where D is summed,
// the SwiGLU GEMM's schedules), and the pins the kernel bench and the tests
// ask for.
#include "model/kernel_choices.h"

#include <gtest/gtest.h>

#include "model/step_plan.h"

namespace tinyllama {
namespace {

// An H100-like device: sm_90a kernels, 132 SMs.
DeviceCaps hopper() {
  DeviceCaps caps;
  caps.kind = DeviceKind::Cuda;
  caps.no_hopper_kernels = "";
  caps.sm_count = 132;
  return caps;
}

ModelConfig model(int heads, int kv_heads, int head_dim) {
  ModelConfig cfg;
  cfg.num_heads = heads;
  cfg.num_kv_heads = kv_heads;
  cfg.hidden_dim = heads * head_dim;
  return cfg;
}

KernelChoices choose(const DeviceCaps& caps, const ModelConfig& cfg, BatchShape shape,
                     DType t = DType::BF16, const KernelPins& pins = {}) {
  return resolve_kernels(caps, cfg, shape, t, pins);
}

TEST(KernelChoices, WithoutTheHopperKernelsEverythingIsMma) {
  for (const DeviceCaps& caps : {DeviceCaps::cpu(), [] {
                                   DeviceCaps c = hopper();
                                   c.no_hopper_kernels = "an sm_80 device";
                                   return c;
                                 }()}) {
    KernelPins pins;
    pins.flash_forward = FlashForwardKernel::PingPong128;
    pins.flash_backward = FlashBackwardKernel::Fused;
    const KernelChoices k = choose(caps, model(8, 4, 128), {8, 1024}, DType::BF16, pins);
    EXPECT_EQ(k.flash_forward, FlashForwardKernel::Mma) << "a pin that cannot run here";
    EXPECT_EQ(k.flash_backward, FlashBackwardKernel::Mma);
    EXPECT_EQ(k.flash_delta, FlashDelta::InDq);
  }
}

TEST(KernelChoices, Fp32AndOtherHeadDimsRunTheMmaKernels) {
  EXPECT_EQ(choose(hopper(), model(8, 4, 128), {8, 1024}, DType::F32).flash_forward,
            FlashForwardKernel::Mma);
  EXPECT_EQ(choose(hopper(), model(8, 4, 32), {8, 1024}).flash_forward, FlashForwardKernel::Mma);
  EXPECT_EQ(choose(hopper(), model(8, 4, 96), {8, 1024}).flash_backward, FlashBackwardKernel::Mma);
}

TEST(KernelChoices, TheDefaultsAreTheKernelBenchsFastest) {
  // head_dim 128: the ping-pong forward; the warp-specialised dK/dV where
  // the grid fills the GPU (8 x 16 tiles x 8 kv heads = 1024 blocks > 132).
  KernelChoices k = choose(hopper(), model(16, 8, 128), {8, 1024});
  EXPECT_EQ(k.flash_forward, FlashForwardKernel::PingPong128);
  EXPECT_EQ(k.flash_backward, FlashBackwardKernel::Specialized);
  // head_dim 64: one warpgroup a block; the two wgmma kernels at the 1 B
  // config's 32 + 16 heads (16 tiles x 48 x 8 = 6144 blocks > 12 x 132).
  k = choose(hopper(), model(32, 16, 64), {8, 1024});
  EXPECT_EQ(k.flash_forward, FlashForwardKernel::Wgmma1x64);
  EXPECT_EQ(k.flash_backward, FlashBackwardKernel::Wgmma);
  EXPECT_EQ(k.swiglu_forward, SwigluGemmKernel::PingPong);
  EXPECT_EQ(k.swiglu_backward, SwigluGemmKernel::TwoBlocks);
}

TEST(KernelChoices, SmallGridsTakeTheOneLaunchBackward) {
  // head_dim 64: 2 tiles x (4 + 2) heads x 8 = 96 blocks <= 12 x 132.
  EXPECT_EQ(choose(hopper(), model(4, 2, 64), {8, 128}).flash_backward,
            FlashBackwardKernel::OneLaunch);
  // At the line: 12 x 132 = 1584 blocks of both roles, and one more tile over.
  EXPECT_EQ(choose(hopper(), model(4, 2, 64), {132, 128}).flash_backward,
            FlashBackwardKernel::OneLaunch);
  EXPECT_EQ(choose(hopper(), model(4, 2, 64), {133, 128}).flash_backward,
            FlashBackwardKernel::Wgmma);
  // head_dim 128: the dK/dV blocks alone at most one per SM.
  EXPECT_EQ(choose(hopper(), model(4, 1, 128), {66, 128}).flash_backward,
            FlashBackwardKernel::OneLaunch);
  EXPECT_EQ(choose(hopper(), model(4, 1, 128), {67, 128}).flash_backward,
            FlashBackwardKernel::Specialized);
  // Switched off (TINYLLAMA_FLASH_ONE_LAUNCH=off), or the SM count unknown.
  DeviceCaps off = hopper();
  off.flash_one_launch = false;
  EXPECT_EQ(choose(off, model(4, 2, 64), {8, 128}).flash_backward, FlashBackwardKernel::Wgmma);
  DeviceCaps unknown = hopper();
  unknown.sm_count = 0;
  EXPECT_EQ(choose(unknown, model(4, 2, 64), {8, 128}).flash_backward, FlashBackwardKernel::Wgmma);
}

TEST(KernelChoices, PinsAreTakenWhereTheyRun) {
  KernelPins pins;
  pins.flash_forward = FlashForwardKernel::Overlap2x64;
  pins.flash_backward = FlashBackwardKernel::Wgmma;
  pins.flash_delta = FlashDelta::Separate;
  pins.swiglu_gemm = SwigluGemmKernel::TwoBlocks;
  const KernelChoices k = choose(hopper(), model(4, 2, 64), {8, 128}, DType::F16, pins);
  EXPECT_EQ(k.flash_forward, FlashForwardKernel::Overlap2x64);
  EXPECT_EQ(k.flash_backward, FlashBackwardKernel::Wgmma) << "not the small grid's default";
  EXPECT_EQ(k.flash_delta, FlashDelta::Separate);
  EXPECT_EQ(k.swiglu_forward, SwigluGemmKernel::TwoBlocks);
  EXPECT_EQ(k.swiglu_backward, SwigluGemmKernel::TwoBlocks);
}

TEST(KernelChoices, PairedHeadsNeedAnEvenGroup) {
  KernelPins pins;
  pins.flash_forward = FlashForwardKernel::Paired2x128;
  EXPECT_EQ(choose(hopper(), model(4, 2, 64), {2, 64}, DType::BF16, pins).flash_forward,
            FlashForwardKernel::Paired2x128);
  EXPECT_EQ(choose(hopper(), model(6, 2, 64), {2, 64}, DType::BF16, pins).flash_forward,
            FlashForwardKernel::Wgmma2x64)
      << "group 3: no two heads share a kv head";
}

TEST(KernelChoices, TheFusedBackwardSumsDInAKernelOfItsOwn) {
  KernelPins pins;
  pins.flash_backward = FlashBackwardKernel::Fused;
  const KernelChoices k = choose(hopper(), model(4, 2, 128), {2, 256}, DType::BF16, pins);
  EXPECT_TRUE(flash_backward_fused(k));
  EXPECT_EQ(k.flash_delta, FlashDelta::Separate);
  EXPECT_FALSE(flash_backward_fused(choose(hopper(), model(4, 2, 128), {2, 256})));
}

TEST(KernelChoices, TheSwigluGemmSaysWhyNot) {
  EXPECT_EQ(swiglu_gemm_unsupported(DeviceCaps::cpu(), DType::F32, 500, 100), "")
      << "the CPU composes the GEMM and the SwiGLU at any shape";
  EXPECT_EQ(swiglu_gemm_unsupported(hopper(), DType::BF16, 512, 2048), "");
  EXPECT_EQ(swiglu_gemm_unsupported(hopper(), DType::F32, 512, 2048), "bf16 or fp16 only");
  EXPECT_EQ(swiglu_gemm_unsupported(hopper(), DType::BF16, 512, 100),
            "the FFN width must be a multiple of 64");
  EXPECT_EQ(swiglu_gemm_unsupported(hopper(), DType::F16, 502, 2048),
            "the hidden width must be a multiple of 8");
  DeviceCaps ampere = hopper();
  ampere.no_hopper_kernels = "needs an sm_90a build on a compute-capability 9.0 device";
  EXPECT_EQ(swiglu_gemm_unsupported(ampere, DType::BF16, 512, 2048), ampere.no_hopper_kernels);
}

TEST(KernelChoices, ThePlanHoldsThemAndTheRequestsPins) {
  PlanRequest request;
  request.level = "v2";
  request.ops = level_preset("v2");
  request.precision = Precision::amp(DType::BF16);
  request.kernel_pins.flash_backward = FlashBackwardKernel::Fused;
  const ModelConfig cfg = model(4, 2, 64);
  const StepPlan plan = resolve_plan(request, hopper(), cfg, {2, 128});
  EXPECT_EQ(plan.kernels, choose(hopper(), cfg, {2, 128}, DType::BF16, request.kernel_pins));
  EXPECT_EQ(plan.kernels.flash_backward, FlashBackwardKernel::Fused);
  EXPECT_TRUE(plan.workspaces.empty()) << "the backend sizes them (plan_for_run)";
}

}  // namespace
}  // namespace tinyllama
