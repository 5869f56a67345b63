#pragma once
// Shared by the flash forward GPU tests (gpu_flash_kernels_test.cc,
// gpu_rope_forward_test.cc): the forward's kernel families they pin one by
// one (in the plan the backend is prepared with), and why a pin has nothing
// to check here.
#include <string>

#include "core/dtype.h"
#include "cuda/gpu_test_util.h"
#include "ops/attention/flash/flash_attention.h"

namespace tinyllama::gpu_test {

struct ForwardPin {
  FlashForwardKernel kernel;
  const char* name;
  KernelPins pins() const {
    KernelPins p;
    p.flash_forward = kernel;
    return p;
  }
};
inline const ForwardPin kForwardPins[] = {{FlashForwardKernel::Mma, "mma"},
                                          {FlashForwardKernel::Wgmma1x64, "wg1x64"},
                                          {FlashForwardKernel::Wgmma1x128, "wg1x128"},
                                          {FlashForwardKernel::Wgmma2x64, "wg2x64"},
                                          {FlashForwardKernel::Wgmma2x128, "wg2x128"},
                                          {FlashForwardKernel::Paired2x64, "pair2x64"},
                                          {FlashForwardKernel::Paired2x128, "pair2x128"},
                                          {FlashForwardKernel::Overlap1x64, "ov1x64"},
                                          {FlashForwardKernel::Overlap2x64, "ov2x64"},
                                          {FlashForwardKernel::Overlap2x128, "ov2x128"},
                                          {FlashForwardKernel::Specialized64, "ws64"},
                                          {FlashForwardKernel::Specialized128, "ws128"},
                                          {FlashForwardKernel::PingPong64, "wspp64"},
                                          {FlashForwardKernel::PingPong128, "wspp128"}};

// Why a pin has nothing to check on this machine or dtype, or "".
inline std::string forward_skip(DType t, const ForwardPin& pin) {
  if (t == DType::F32 && pin.kernel != FlashForwardKernel::Mma) {
    return "fp32 runs its own kernel whatever the pin";
  }
  if (pin.kernel != FlashForwardKernel::Mma && !cuda::flash_hopper_kernels_available()) {
    return "the Hopper kernels need an sm_90 device and an sm_90a build";
  }
  return "";
}

template <typename Param>
using FlashForwardPinTest = GpuParamTest<Param>;

}  // namespace tinyllama::gpu_test
