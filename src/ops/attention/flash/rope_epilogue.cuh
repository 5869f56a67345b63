#pragma once
// RopeImpl::Fused's half in the flash backward: the inverse RoPE rotation
// of dQ and dK, applied to the fp32 accumulators before they are scaled,
// rounded and stored, instead of a separate rope_backward pass over the
// rounded gradients. An interleaved pair (columns 2i, 2i+1) always sits in
// one thread's registers: the wgmma and mma.sync accumulators hold columns
// 8 dt + 2t and 8 dt + 2t + 1 of each 8-column block, the fp32 kernels
// cg W + 16 W j + e with W even.
//
// The angles come from a table of (cos, sin) per (position, pair), [seq,
// hd/2] float2, built once per shape by ops/rope/cuda_rope.cu's rope_table()
// with cuda_rope.cu's own angle arithmetic. The rotation is linear and
// the same for every query head of a kv group, so rotating dK's sum over
// the group is rotating each head's share.
#include <cstdint>

namespace tinyllama::cuda::flash {

// (a, b) rotated by -angle, where cs = (cos angle, sin angle): the inverse
// of rope_forward's (a cos - b sin, a sin + b cos).
__device__ __forceinline__ void rope_unrotate(float& a, float& b, float2 cs) {
  const float x = a;
  const float y = b;
  a = fmaf(x, cs.x, y * cs.y);
  b = fmaf(y, cs.x, -x * cs.y);
}

// A warp's 16-row slice of an mma.sync / wgmma accumulator, as both leave
// it: rows pos0 (elements 0, 1 of each 8-column block) and pos0 + 8
// (elements 2, 3), lane t = lane % 4 owning pair 4 dt + t. pos0 is the
// position in the sequence; rows at or past seq (tails, never stored) are
// left alone so the table is never read past its end. table == nullptr:
// no rotation.
template <int HD>
__device__ __forceinline__ void rope_unrotate_acc(float (&acc)[HD / 8][4], const float* table,
                                                  int pos0, int seq, int t) {
  if (table == nullptr) return;
  const float2* cs = reinterpret_cast<const float2*>(table);
  const int pos1 = pos0 + 8;
#pragma unroll
  for (int dt = 0; dt < HD / 8; ++dt) {
    const int pair = dt * 4 + t;
    if (pos0 < seq) {
      rope_unrotate(acc[dt][0], acc[dt][1], cs[static_cast<std::int64_t>(pos0) * (HD / 2) + pair]);
    }
    if (pos1 < seq) {
      rope_unrotate(acc[dt][2], acc[dt][3], cs[static_cast<std::int64_t>(pos1) * (HD / 2) + pair]);
    }
  }
}

// The fp32 kernels' accumulator (fp32_tiles.cuh): row i is position
// pos0 + i, element j W + e is column cg W + 16 W j + e. Rows at or past
// seq are left alone.
template <int RM, int HD, int W, int OC>
__device__ __forceinline__ void rope_unrotate_f32(float (&acc)[RM][OC], const float* table,
                                                  int pos0, int seq, int cg) {
  static_assert(W % 2 == 0, "a thread must own whole pairs");
  if (table == nullptr) return;
  const float2* cs = reinterpret_cast<const float2*>(table);
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int pos = pos0 + i;
    if (pos >= seq) continue;
    const float2* row = cs + static_cast<std::int64_t>(pos) * (HD / 2);
#pragma unroll
    for (int j = 0; j < OC / W; ++j) {
#pragma unroll
      for (int e = 0; e < W; e += 2) {
        const int col = cg * W + 16 * W * j + e;
        rope_unrotate(acc[i][j * W + e], acc[i][j * W + e + 1], row[col / 2]);
      }
    }
  }
}

}  // namespace tinyllama::cuda::flash
