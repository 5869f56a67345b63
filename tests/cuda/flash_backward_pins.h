#pragma once
// Shared by the flash backward GPU tests (gpu_flash_kernels_test.cc,
// gpu_rope_fused_test.cc): the process-wide pins they run each case under
// (kernel family, where D = rowsum(dO * O) is computed), why a pin has
// nothing to check here, and a fixture that puts the pins back after
// every test.
#include <string>

#include "core/dtype.h"
#include "cuda/flash/flash_attention.h"
#include "gpu_test_util.h"

namespace tinyllama::gpu_test {

struct BackwardPin {
  cuda::FlashBackwardKernel kernel;
  const char* name;
};
inline const BackwardPin kBackwardPins[] = {{cuda::FlashBackwardKernel::Mma, "mma"},
                                            {cuda::FlashBackwardKernel::Wgmma, "wgmma"},
                                            {cuda::FlashBackwardKernel::Specialized, "ws"},
                                            {cuda::FlashBackwardKernel::Fused, "fused"},
                                            {cuda::FlashBackwardKernel::OneLaunch, "onelaunch"}};

// D in the dQ kernel's prologue (the default) or in a kernel of its own.
struct DeltaPin {
  cuda::FlashDelta where;
  const char* name;
};
inline const DeltaPin kDeltaPins[] = {{cuda::FlashDelta::InDq, "dq_delta"},
                                      {cuda::FlashDelta::Separate, "separate_delta"}};

// Why a pin has nothing to check on this machine or dtype, or "".
inline std::string backward_skip(DType t, const BackwardPin& pin) {
  if (t == DType::F32 && pin.kernel != cuda::FlashBackwardKernel::Mma) {
    return "fp32 runs its own kernels whatever the pin";
  }
  if (pin.kernel != cuda::FlashBackwardKernel::Mma && !cuda::flash_hopper_kernels_available()) {
    return "the Hopper kernels need an sm_90 device and an sm_90a build";
  }
  return "";
}

template <typename Param>
class FlashBackwardPinTest : public GpuParamTest<Param> {
 protected:
  void TearDown() override {
    cuda::set_flash_backward_kernel(cuda::FlashBackwardKernel::Best);
    cuda::set_flash_backward_delta(cuda::FlashDelta::InDq);
  }
};

}  // namespace tinyllama::gpu_test
