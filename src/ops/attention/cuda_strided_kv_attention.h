#pragma once
// The exercise fault noncontiguous-kv's slow attention forward (out and
// lse as the flash forward writes them).
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cuda {

void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v, const AttentionShape& s,
                                  cudaStream_t stream);

}  // namespace tinyllama::cuda
