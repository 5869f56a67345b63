#pragma once
// The thread-level building blocks of the fp32 kernels (plain FMA, no TF32:
// fp32 means fp32): the thread-to-element layout, half-warp row reductions,
// the two product loops (S = A B^T and O += P B, both from shared memory)
// and the scaled store of a thread's accumulator rows.
#include <cstdint>

namespace tinyllama::cuda::flash {

// 128 threads = 8 row groups (rg = tid / 16) x 16 column lanes (cg = tid % 16).
// A thread owns tile rows rg*RM + i and score columns cg + 16*c; the 16 lanes
// of a row group are one half-warp, so row reductions are 4 shuffles. Shared
// row stride HD + 4 floats: the 8 different rows one float4 phase reads start
// in 8 different bank groups.

template <int HD>
struct F32Tile {
  static constexpr int LDS = HD + 4;
  // Output columns of a thread: cg*W + 16*W*j + e, float4 (or float2 where
  // HD / 16 is not a multiple of 4: hd 32 and 96) reads of V rows that cover
  // a contiguous 64 (32) floats per half-warp.
  static_assert(HD % 32 == 0, "a thread's columns come in float2 or float4 groups");
  static constexpr int W = (HD / 16) % 4 == 0 ? 4 : 2;
  static constexpr int J = HD / 16 / W;
  static constexpr int OC = HD / 16;  // output columns per thread
};

__device__ __forceinline__ float half_warp_max(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

__device__ __forceinline__ float half_warp_sum(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// acc[i][c] += A[rg*RM + i] . B[cg + 16c] over HD (both row stride LDS).
template <int RM, int CN, int HD>
__device__ __forceinline__ void f32_abt(float (&acc)[RM][CN], const float* A, const float* B,
                                        int rg, int cg) {
  constexpr int LDS = F32Tile<HD>::LDS;
#pragma unroll 4
  for (int d = 0; d < HD; d += 4) {
    float4 x[RM], y[CN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
      x[i] = *reinterpret_cast<const float4*>(A + (rg * RM + i) * LDS + d);
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      y[c] = *reinterpret_cast<const float4*>(B + (cg + 16 * c) * LDS + d);
    }
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        float s = acc[i][c];
        s = fmaf(x[i].x, y[c].x, s);
        s = fmaf(x[i].y, y[c].y, s);
        s = fmaf(x[i].z, y[c].z, s);
        s = fmaf(x[i].w, y[c].w, s);
        acc[i][c] = s;
      }
    }
  }
}

// acc[i][*] += P[rg*RM + i][0..NC) * B[0..NC)[thread's columns]; P row stride
// LDP, B row stride HD + 4.
template <int RM, int HD, int NC, int LDP>
__device__ __forceinline__ void f32_pb(float (&acc)[RM][F32Tile<HD>::OC], const float* P,
                                       const float* B, int rg, int cg) {
  using Tl = F32Tile<HD>;
  constexpr int LDS = Tl::LDS, W = Tl::W, J = Tl::J;
#pragma unroll 2
  for (int c = 0; c < NC; c += 4) {
    float4 p[RM];
#pragma unroll
    for (int i = 0; i < RM; ++i)
      p[i] = *reinterpret_cast<const float4*>(P + (rg * RM + i) * LDP + c);
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      float bv[Tl::OC];
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const float* src = B + (c + cc) * LDS + cg * W + 16 * W * j;
        if constexpr (W == 4) {
          const float4 v = *reinterpret_cast<const float4*>(src);
          bv[j * 4 + 0] = v.x;
          bv[j * 4 + 1] = v.y;
          bv[j * 4 + 2] = v.z;
          bv[j * 4 + 3] = v.w;
        } else {
          const float2 v = *reinterpret_cast<const float2*>(src);
          bv[j * 2 + 0] = v.x;
          bv[j * 2 + 1] = v.y;
        }
      }
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float pv = cc == 0 ? p[i].x : cc == 1 ? p[i].y : cc == 2 ? p[i].z : p[i].w;
#pragma unroll
        for (int n = 0; n < Tl::OC; ++n) acc[i][n] = fmaf(pv, bv[n], acc[i][n]);
      }
    }
  }
}

// Stores a thread's RM x OC accumulator rows (times f) where row < valid.
template <int RM, int HD>
__device__ __forceinline__ void f32_store_rows(float* dst, std::int64_t ld,
                                               const float (&acc)[RM][F32Tile<HD>::OC],
                                               const float (&f)[RM], int rg, int cg, int valid,
                                               bool vec) {
  using Tl = F32Tile<HD>;
  constexpr int W = Tl::W;
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = rg * RM + i;
    if (r >= valid) continue;
    float* row = dst + r * ld;
#pragma unroll
    for (int j = 0; j < Tl::J; ++j) {
      float* p = row + cg * W + 16 * W * j;
      if constexpr (W == 4) {
        if (vec) {
          *reinterpret_cast<float4*>(p) =
              make_float4(acc[i][j * 4] * f[i], acc[i][j * 4 + 1] * f[i], acc[i][j * 4 + 2] * f[i],
                          acc[i][j * 4 + 3] * f[i]);
          continue;
        }
      }
#pragma unroll
      for (int e = 0; e < W; ++e) p[e] = acc[i][j * W + e] * f[i];
    }
  }
}

}  // namespace tinyllama::cuda::flash
