#pragma once
// The RoPE rotation of one interleaved pair, written once for the rope
// kernel (cuda_rope.cu) and the flash forward's rotation of its tiles
// (flash/rope_tiles.cuh): the same expression compiles to the same fused
// multiply-adds in both, so RopeImpl::Fused's forward writes the bits the
// separate pass writes.
namespace tinyllama::cuda {

// (a, b) rotated by the angle whose cosine and sine are c and s:
// (a c - b s, a s + b c). The roundings are spelled out (one product, then
// a fused multiply-add) so that no kernel's contraction choice changes the
// bits.
__device__ __forceinline__ void rope_rotate(float& a, float& b, float c, float s) {
  const float x = a;
  const float y = b;
  a = __fmaf_rn(x, c, __fmul_rn(-y, s));
  b = __fmaf_rn(x, s, __fmul_rn(y, c));
}

}  // namespace tinyllama::cuda
