#include "train/backend_factory.h"

#include "cpu/cpu_backend.h"
#include "cuda/cuda_entry.h"

namespace tinyllama {

std::unique_ptr<Backend> make_backend(DeviceKind device, Precision precision) {
  if (device == DeviceKind::Cuda) return make_cuda_backend(precision);
  return std::make_unique<CpuBackend>(CpuKernels::Fast);
}

DeviceCaps device_caps(DeviceKind device) {
  return device == DeviceKind::Cuda ? cuda_device_caps() : DeviceCaps::cpu();
}

}  // namespace tinyllama
