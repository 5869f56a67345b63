#pragma once
// The global gradient norm and its clip coefficient on the GPU.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cuda {

// cuda_grad_norm.cu: Backend::sum_squares and Backend::clip_by_norm.
void sum_squares(Mat x, double* acc, cudaStream_t stream);
void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm,
                  cudaStream_t stream);

}  // namespace tinyllama::cuda
