#pragma once
// Kernel launches with or without programmatic dependent launch (PDL,
// sm_90+). A kernel launched with PDL may be scheduled while the kernel
// before it in the stream still runs, once every block of that one has
// called pdl_allow_next (or exited). The rule for every kernel that may be
// launched so (docs/ARCHITECTURE.md, "Kernels"):
//   * it calls pdl_wait_previous() before it reads anything an earlier
//     kernel wrote and before it writes anything an earlier kernel may
//     still read -- in practice its first statement, after only index
//     arithmetic and reads of its parameters;
//   * no thread returns before it has waited, so that the kernel's
//     completion still implies its predecessors' (the next kernel's wait
//     relies on it);
//   * it calls pdl_allow_next() right after the wait, so that the next
//     kernel's blocks are placed as SMs free up and wait in their own
//     pdl_wait_previous.
// Both are no-ops in a kernel launched plainly, and compile to nothing
// below sm_90.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "device/cuda_check.h"
#include "device/cuda_launch.h"

namespace tinyllama::cuda {

__device__ __forceinline__ void pdl_allow_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// Returns once the kernels this one depends on have completed and their
// writes are visible.
__device__ __forceinline__ void pdl_wait_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// The launch, with the PDL attribute when `programmatic`. Only a kernel
// that follows the rule above may be launched with it.
template <typename... Params, typename... Args>
void launch_with_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared,
                     cudaStream_t stream, bool programmatic, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &overlap;
  config.numAttrs = programmatic ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// The launch as the stream is set (cuda_launch.h): with PDL on the streams
// of a backend whose plan asks for it, plainly elsewhere.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared,
                   cudaStream_t stream, Args&&... args) {
  launch_with_pdl(kernel, grid, block, shared, stream, programmatic_launch(stream),
                  std::forward<Args>(args)...);
}

// Opting in to more than 48 KiB of dynamic shared memory is per kernel; once
// per instantiation is enough (a failure throws and is retried next call).
template <auto Kernel>
void allow_smem(std::size_t bytes) {
  static const bool done = [bytes] {
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)));
    return true;
  }();
  (void)done;
}

}  // namespace tinyllama::cuda
