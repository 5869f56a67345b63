#pragma once
// The SwiGLU GEMM kernels' launchers (defined and instantiated for bf16 and
// fp16 in their own .cu files), called by swiglu_gemm.cu with the operands'
// tensor maps: A (x or d_out) in 128-row boxes, B (w_gu or w_down) in 64-row
// boxes.
#include <cuda.h>
#include <cuda_runtime.h>

#include "ops/swiglu/swiglu_gemm/tiles.cuh"

namespace tinyllama::cuda::swiglu_gemm {

template <typename T, Epi E>
void launch_two_blocks(const CUtensorMap& ta, const CUtensorMap& tb, const EpiArgs& args,
                       cudaStream_t stream);
template <typename T, Epi E>
void launch_pingpong(const CUtensorMap& ta, const CUtensorMap& tb, const EpiArgs& args,
                     cudaStream_t stream);

}  // namespace tinyllama::cuda::swiglu_gemm
