#pragma once
// The feed-forward's SwiGLU inside the GEMMs next to it, on Hopper (bf16 /
// fp16, sm_90a build, 9.0 device): one kernel each way instead of a cuBLASLt
// GEMM and an elementwise pass over its [tokens, 2F] output.
//   forward:  gate_up = x w_gu^T (gate in columns [0, F), up in [F, 2F)),
//             hidden = silu(gate) * up, from the gate and up as rounded and
//             stored, so that hidden matches swiglu_forward on them.
//   backward: d_hidden = d_out w_down, rounded as a stored GEMM output would
//             be but never stored, then d_gate = dh u s (1 + g (1 - s)) and
//             d_up = dh g s, s = sigmoid(g), as swiglu_backward computes them.
// Both are TMA-fed wgmma GEMMs with the SwiGLU in the epilogue
// (kernel_pingpong.cu, kernel_two_blocks.cu); the products sum in another
// order than cuBLASLt's, so the results match the unfused ops within a
// GEMM's rounding, not to the bit.
#include <cuda_runtime.h>

#include <string>

#include "core/mat.h"
#include "model/kernel_choices.h"

namespace tinyllama::cuda {

// What the kernels take (model/kernel_choices.h, swiglu_gemm_unsupported:
// an sm_90a build on a 9.0 device, bf16 / fp16, F a multiple of 64, D of 8)
// is checked here too, with every operand's rows 16-byte aligned. `kernel`
// is the plan's schedule (KernelChoices::swiglu_forward / _backward):
// PingPong (persistent, a producer warpgroup, two consumers taking turns)
// or TwoBlocks (two blocks an SM, no producer).

// gate_up [N, 2F], hidden [N, F], x [N, D], w_gu [2F, D].
void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu, SwigluGemmKernel kernel,
                         cudaStream_t stream);
// d_gate_up [N, 2F], d_out [N, D], w_down [D, F], gate_up [N, 2F].
void gemm_swiglu_backward(Mat d_gate_up, Mat d_out, Mat w_down, Mat gate_up,
                          SwigluGemmKernel kernel, cudaStream_t stream);

}  // namespace tinyllama::cuda
