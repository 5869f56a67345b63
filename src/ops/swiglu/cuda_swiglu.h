#pragma once
// SiLU and the fused SwiGLU on the GPU (the GEMM with the SwiGLU in its
// epilogue is swiglu_gemm/).
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include "core/mat.h"

namespace tinyllama::cuda {

void silu_forward(Mat out, Mat x, cudaStream_t stream);
void silu_backward(Mat dx, Mat dout, Mat x, cudaStream_t stream);
void swiglu_forward(Mat out, Mat gate, Mat up, cudaStream_t stream);
void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up, cudaStream_t stream);

}  // namespace tinyllama::cuda
