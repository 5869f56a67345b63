#include "model/backend_factory.h"

#include "cpu/cpu_backend.h"

namespace tinyllama {

std::unique_ptr<Backend> make_backend(DeviceKind device, Precision precision) {
  if (device == DeviceKind::Cuda) return make_cuda_backend(precision);
  return std::make_unique<CpuBackend>();
}

}  // namespace tinyllama
