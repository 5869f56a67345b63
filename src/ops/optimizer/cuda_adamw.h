#pragma once
// AdamW on the GPU, and the non-finite check of fp16 steps.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cuda {

// cuda_adamw.cu
void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp, cudaStream_t stream);
// The whole flat block in one sweep (contiguous views), also writing
// compute_copy = param in its dtype when non-empty; bit-identical to adamw
// followed by convert.
void adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy, const AdamWHyper& hp,
                 cudaStream_t stream);
// *flag = 1 when any element of x is inf or nan; otherwise *flag is untouched.
void flag_nonfinite(Mat x, std::int32_t* flag, cudaStream_t stream);

}  // namespace tinyllama::cuda
