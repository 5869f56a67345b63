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

namespace tinyllama::cuda {

// Empty when the kernels can take these operands; otherwise why not (for
// the plan's fallback note): no sm_90a build or no 9.0 device, not bf16 /
// fp16, F not a multiple of 64, rows not 16-byte aligned.
std::string swiglu_gemm_unsupported(DType dtype, std::int64_t hidden_dim, std::int64_t ffn_dim);

// Which kernel runs: PingPong (persistent, a producer warpgroup, two
// consumers taking turns), TwoBlocks (two blocks an SM, no producer), or
// Best (the default): the one the kernel bench measured faster each way,
// ping-pong forward and two blocks backward (H100, docs/PERFORMANCE.md).
// Process-wide, for the kernel bench and the tests.
enum class SwigluGemmKernel { Best, PingPong, TwoBlocks };
void set_swiglu_gemm_kernel(SwigluGemmKernel kernel);

// gate_up [N, 2F], hidden [N, F], x [N, D], w_gu [2F, D].
void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu, cudaStream_t stream);
// d_gate_up [N, 2F], d_out [N, D], w_down [D, F], gate_up [N, 2F].
void gemm_swiglu_backward(Mat d_gate_up, Mat d_out, Mat w_down, Mat gate_up, cudaStream_t stream);

}  // namespace tinyllama::cuda
