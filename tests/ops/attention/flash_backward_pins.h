#pragma once
// Shared by the flash backward GPU tests (gpu_flash_kernels_test.cc,
// gpu_rope_fused_test.cc): the pins they run each case under (kernel
// family, where D = rowsum(dO * O) is computed; in the plan the backend is
// prepared with), and why a pin has nothing to check here.
#include <string>

#include "core/dtype.h"
#include "cuda/gpu_test_util.h"
#include "ops/attention/flash/flash_attention.h"

namespace tinyllama::gpu_test {

struct BackwardPin {
  FlashBackwardKernel kernel;
  const char* name;
};
inline const BackwardPin kBackwardPins[] = {{FlashBackwardKernel::Mma, "mma"},
                                            {FlashBackwardKernel::Wgmma, "wgmma"},
                                            {FlashBackwardKernel::Specialized, "ws"},
                                            {FlashBackwardKernel::Fused, "fused"},
                                            {FlashBackwardKernel::OneLaunch, "onelaunch"}};

// D in the dQ kernel's prologue (the default) or in a kernel of its own.
struct DeltaPin {
  FlashDelta where;
  const char* name;
};
inline const DeltaPin kDeltaPins[] = {{FlashDelta::InDq, "dq_delta"},
                                      {FlashDelta::Separate, "separate_delta"}};

inline KernelPins backward_pins(FlashBackwardKernel kernel, FlashDelta where = FlashDelta::InDq) {
  KernelPins p;
  p.flash_backward = kernel;
  p.flash_delta = where;
  return p;
}

// Why a pin has nothing to check on this machine or dtype, or "".
inline std::string backward_skip(DType t, const BackwardPin& pin) {
  if (t == DType::F32 && pin.kernel != FlashBackwardKernel::Mma) {
    return "fp32 runs its own kernels whatever the pin";
  }
  if (pin.kernel != FlashBackwardKernel::Mma && !cuda::flash_hopper_kernels_available()) {
    return "the Hopper kernels need an sm_90 device and an sm_90a build";
  }
  return "";
}

template <typename Param>
using FlashBackwardPinTest = GpuParamTest<Param>;

}  // namespace tinyllama::gpu_test
