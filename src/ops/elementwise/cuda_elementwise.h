#pragma once
// The residual add and the product on the GPU: arithmetic in fp32, one
// rounding on the store.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include "core/mat.h"

namespace tinyllama::cuda {

void add(Mat out, Mat a, Mat b, cudaStream_t stream);
void mul(Mat out, Mat a, Mat b, cudaStream_t stream);

}  // namespace tinyllama::cuda
