#pragma once
// SiLU and the fused SwiGLU on the GPU (the GEMM with the SwiGLU in its
// epilogue is swiglu_gemm/).
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include "core/mat.h"
#include "ops/linear/cuda_fp8_cast.h"

namespace tinyllama::cuda {

void silu_forward(Mat out, Mat x, cudaStream_t stream);
void silu_backward(Mat dx, Mat dout, Mat x, cudaStream_t stream);
void swiglu_forward(Mat out, Mat gate, Mat up, cudaStream_t stream);
void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up, cudaStream_t stream);

// The SwiGLU passes whose results FP8 GEMMs read (issue 45;
// cuda_swiglu_fp8.cu): one launch computes what swiglu_forward
// (swiglu_backward) would store and casts it as fp8_cast_transpose casts
// the stored tensor, with *scale, into out and out_t (either may be null;
// both, with an amax, is a pass that only finds the amax), raising *amax
// when it is not null. The bf16 results are stored too only
// when asked (keep_hidden, keep_grads). The backward's FP8 tensor is
// [rows, 2F]: the gate's gradient in columns [0, F), the up's in [F, 2F).
// Each runs in whole 64 x 64 tiles of bf16: where the shapes or alignments
// do not fit them, it launches nothing and returns false, and the caller
// runs the SwiGLU op and the cast instead.
bool try_swiglu_forward_fp8(Mat hidden, bool keep_hidden, Mat gate, Mat up, const float* scale,
                            Fp8Format f, Fp8View out, Fp8View out_t, float* amax,
                            cudaStream_t stream);
bool try_swiglu_backward_fp8(Mat dgate, Mat dup, bool keep_grads, Mat dout, Mat gate, Mat up,
                             const float* scale, Fp8Format f, Fp8View out, Fp8View out_t,
                             float* amax, cudaStream_t stream);

}  // namespace tinyllama::cuda
