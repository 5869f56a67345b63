#pragma once
// Shared by the flash forward GPU tests (gpu_flash_kernels_test.cc,
// gpu_rope_forward_test.cc): the forward's kernel families they pin one by
// one, why a pin has nothing to check here, and a fixture that puts the pin
// back after every test.
#include <string>

#include "core/dtype.h"
#include "cuda/flash/flash_attention.h"
#include "gpu_test_util.h"

namespace tinyllama::gpu_test {

struct ForwardPin {
  cuda::FlashForwardKernel kernel;
  const char* name;
};
inline const ForwardPin kForwardPins[] = {{cuda::FlashForwardKernel::Mma, "mma"},
                                          {cuda::FlashForwardKernel::Wgmma1x64, "wg1x64"},
                                          {cuda::FlashForwardKernel::Wgmma1x128, "wg1x128"},
                                          {cuda::FlashForwardKernel::Wgmma2x64, "wg2x64"},
                                          {cuda::FlashForwardKernel::Wgmma2x128, "wg2x128"},
                                          {cuda::FlashForwardKernel::Paired2x64, "pair2x64"},
                                          {cuda::FlashForwardKernel::Paired2x128, "pair2x128"},
                                          {cuda::FlashForwardKernel::Overlap1x64, "ov1x64"},
                                          {cuda::FlashForwardKernel::Overlap2x64, "ov2x64"},
                                          {cuda::FlashForwardKernel::Overlap2x128, "ov2x128"},
                                          {cuda::FlashForwardKernel::Specialized64, "ws64"},
                                          {cuda::FlashForwardKernel::Specialized128, "ws128"},
                                          {cuda::FlashForwardKernel::PingPong64, "wspp64"},
                                          {cuda::FlashForwardKernel::PingPong128, "wspp128"}};

// Why a pin has nothing to check on this machine or dtype, or "".
inline std::string forward_skip(DType t, const ForwardPin& pin) {
  if (t == DType::F32 && pin.kernel != cuda::FlashForwardKernel::Mma) {
    return "fp32 runs its own kernel whatever the pin";
  }
  if (pin.kernel != cuda::FlashForwardKernel::Mma && !cuda::flash_hopper_kernels_available()) {
    return "the Hopper kernels need an sm_90 device and an sm_90a build";
  }
  return "";
}

template <typename Param>
class FlashForwardPinTest : public GpuParamTest<Param> {
 protected:
  void TearDown() override { cuda::set_flash_forward_kernel(cuda::FlashForwardKernel::Best); }
};

}  // namespace tinyllama::gpu_test
