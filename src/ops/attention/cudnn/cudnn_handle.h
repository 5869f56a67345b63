#pragma once
// One cuDNN handle per device for the whole process. A handle is bound to
// the device current at its creation, and execution plans are built for a
// handle, so plans and the handle that runs them must agree; creating a
// handle is also slow (it loads cuDNN's sub-libraries), so it happens once.
//
// The handle's stream is state: each execution sets it and runs under the
// device's mutex, so two threads running plans on different streams cannot
// interleave a cudnnSetStream with the other's cudnnBackendExecute.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <mutex>

namespace tinyllama::cuda::cudnn {

struct DeviceHandle {
  int device = -1;
  cudnnHandle_t handle = nullptr;
  std::mutex* execute_mutex = nullptr;  // guards cudnnSetStream + cudnnBackendExecute
};

// The current device's handle, created on first use. Handles live until the
// process ends (destroying them from a static destructor can run after the
// CUDA runtime has shut down).
DeviceHandle handle_for_current_device();

// The current device (RuntimeFailure when there is none).
int current_device();

}  // namespace tinyllama::cuda::cudnn
