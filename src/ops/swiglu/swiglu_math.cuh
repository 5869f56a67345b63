#pragma once
// SwiGLU's arithmetic, written once for the elementwise kernels
// (cuda_elementwise.cu) and the SwiGLU GEMMs' epilogues (swiglu_gemm/
// tiles.cuh): the same expressions compile to the same instructions in both,
// so `--swiglu gemm` computes what the fused kernels compute from the same
// stored inputs.
namespace tinyllama::cuda {

__device__ __forceinline__ float sigmoid(float x) {
  return 1.f / (1.f + expf(-x));
}

// h = silu(g) * u.
__device__ __forceinline__ float swiglu_value(float g, float u) {
  return g * sigmoid(g) * u;
}

// The gradients of h = silu(g) * u: dg = dh u silu'(g), du = dh silu(g).
__device__ __forceinline__ void swiglu_grads(float dh, float g, float u, float& dg, float& du) {
  const float s = sigmoid(g);
  dg = dh * u * s * (1.f + g * (1.f - s));
  du = dh * g * s;
}

}  // namespace tinyllama::cuda
