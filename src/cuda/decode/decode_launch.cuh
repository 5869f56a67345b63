#pragma once
// Launches for the batch-1 decode step's kernels, optionally with
// programmatic dependent launch (PDL): such a kernel may be scheduled while
// the kernel before it in the stream still runs (once that one's blocks
// have all called pdl_allow_next), and must call pdl_wait_previous before
// it reads anything an earlier kernel wrote and before any of its threads
// exits, so that its completion still implies its predecessors'.
#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.h"

namespace tinyllama::cuda {

__device__ __forceinline__ void pdl_allow_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// A no-op in a kernel not launched programmatically.
__device__ __forceinline__ void pdl_wait_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

template <typename... Params, typename... Args>
void launch_decode_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared,
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

}  // namespace tinyllama::cuda
