#pragma once
// The precision casts on the GPU.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include "core/mat.h"

namespace tinyllama::cuda {

void convert(Mat dst, Mat src, cudaStream_t stream);

}  // namespace tinyllama::cuda
