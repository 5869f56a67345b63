#include "ops/attention/cudnn/cudnn_handle.h"

#include <map>
#include <memory>

#include "device/cuda_check.h"
#include "ops/attention/cudnn/backend_descriptor.h"

namespace tinyllama::cuda::cudnn {

namespace {

struct Slot {
  cudnnHandle_t handle = nullptr;
  std::mutex execute_mutex;
};

}  // namespace

int current_device() {
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

DeviceHandle handle_for_current_device() {
  static std::mutex mutex;
  // Never destroyed (see the header): leaked on purpose at exit.
  static auto* slots = new std::map<int, std::unique_ptr<Slot>>();
  const int device = current_device();
  const std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Slot>& slot = (*slots)[device];
  if (!slot) {
    auto fresh = std::make_unique<Slot>();
    check(cudnnCreate(&fresh->handle), "cudnnCreate");
    slot = std::move(fresh);
  }
  return DeviceHandle{device, slot->handle, &slot->execute_mutex};
}

}  // namespace tinyllama::cuda::cudnn
