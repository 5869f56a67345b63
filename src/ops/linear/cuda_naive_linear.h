#pragma once
// The exercise fault naive-swiglu's slow projection.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include "core/mat.h"

namespace tinyllama::cuda {

void naive_linear(Mat out, Mat x, Mat w, cudaStream_t stream);

}  // namespace tinyllama::cuda
