#pragma once
// The cross-entropy loss on the GPU.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"
#include "model/kernel_choices.h"

namespace tinyllama::cuda {

// cuda_cross_entropy_fused.cu: losses, and dlogits over the logits with
// the scale read from device memory when the kernel runs.
// `rows` is the plan's (KernelChoices::loss_rows): Auto stages rows of
// kCrossEntropyStagedMinRowBytes or more in shared memory (one DRAM read a
// row instead of two; cross_entropy_rows.h), Staged every row that fits,
// Streamed none.
void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                         const float* scale_on_device, LossRows rows, cudaStream_t stream);
// Whether a row of `cols` logits of `dtype` is staged under `rows` (rows of
// 16-byte aligned vectors only; the call checks that itself).
bool cross_entropy_rows_staged(std::int64_t cols, DType dtype, LossRows rows);
// cuda_cross_entropy.cu
void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets,
                           cudaStream_t stream);
void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets, float scale,
                            cudaStream_t stream);
// The scale read from device memory when the kernel runs (graph replays).
void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                            const float* scale_on_device, cudaStream_t stream);

}  // namespace tinyllama::cuda
