#pragma once
// Every CUDA and cuBLASLt call is checked: a failure becomes a RuntimeFailure
// naming the call, the library's own error string and where it happened, so
// the CLI prints one line instead of continuing on garbage.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/errors.h"

namespace tinyllama::cuda {

[[noreturn]] inline void throw_failure(const char* call, const char* why, const char* file,
                                       int line) {
  throw RuntimeFailure(std::string("CUDA error: ") + call + " failed: " + why + " (" + file + ":" +
                       std::to_string(line) + ")");
}

}  // namespace tinyllama::cuda

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    const cudaError_t tl_err_ = (call);                                                         \
    if (tl_err_ != cudaSuccess) {                                                               \
      ::tinyllama::cuda::throw_failure(#call, cudaGetErrorString(tl_err_), __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)

#define CUBLAS_CHECK(call)                                                                   \
  do {                                                                                       \
    const cublasStatus_t tl_status_ = (call);                                                \
    if (tl_status_ != CUBLAS_STATUS_SUCCESS) {                                               \
      ::tinyllama::cuda::throw_failure(#call, cublasLtGetStatusString(tl_status_), __FILE__, \
                                       __LINE__);                                            \
    }                                                                                        \
  } while (0)

// After every kernel launch: a bad launch configuration is reported here, at
// the op that caused it, not at the next synchronising call.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
