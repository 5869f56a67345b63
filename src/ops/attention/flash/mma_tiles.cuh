#pragma once
// The warp-level building blocks of the tensor-core (bf16 / fp16) kernels:
// which shared-memory element each lane hands ldmatrix for the A and B
// fragments, the two MMA loops (S = A B^T from two shared tiles, O += P B
// with P taken straight from score accumulators), stage_acc (accumulators to
// a shared staging tile as T) and the reductions over the 4 lanes (a quad)
// that hold one accumulator row. A block is 4 warps; each warp owns 16 rows.
#include "ops/attention/flash/arch.cuh"

namespace tinyllama::cuda::flash {

// Fragment addressing, with lane = 0..31, g = lane / 4, t = lane % 4:
//  * A operand, 16 rows x 16 k from a row-major tile: lane supplies row
//    (lane & 15), column (lane >> 4) * 8.
//  * B operand from a tile stored [n][k] (K for Q K^T): one x4 load gives two
//    n-tiles of 8; lane supplies row (lane & 7) + (lane >> 4) * 8, column
//    ((lane >> 3) & 1) * 8.
//  * B operand from a tile stored [k][n] (V for P V): x4.trans; lane supplies
//    row (lane & 7) + ((lane >> 3) & 1) * 8, column (lane >> 4) * 8.
//  * accumulator element (row g or g + 8, column 2t or 2t + 1) of each n-tile.
// Shared tiles have a row stride of HD + 8 elements: 16 bytes of padding put
// the 8 rows an ldmatrix phase reads into 8 different bank groups.

template <int HD>
struct MmaTile {
  static constexpr int LDS = HD + 8;
};

__device__ __forceinline__ int a_row(int lane) {
  return lane & 15;
}
__device__ __forceinline__ int a_col(int lane) {
  return (lane >> 4) * 8;
}
__device__ __forceinline__ int bnk_row(int lane) {
  return (lane & 7) + ((lane >> 4) << 3);
}
__device__ __forceinline__ int bnk_col(int lane) {
  return ((lane >> 3) & 1) * 8;
}
__device__ __forceinline__ int bkn_row(int lane) {
  return (lane & 7) + (((lane >> 3) & 1) << 3);
}
__device__ __forceinline__ int bkn_col(int lane) {
  return (lane >> 4) * 8;
}

// The score accumulators of key columns [16*kk, 16*kk+16) as the A operand
// of the next MMA: C fragments of n-tiles 2kk and 2kk+1 are exactly the
// a0..a3 registers of a 16x16 A fragment.
template <typename T, int N>
__device__ __forceinline__ void acc_to_a(unsigned (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = pack2<T>(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack2<T>(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// acc[BN/8][4] += A[16 rows of a_tile] * B[BN rows of b_tile]^T over HD.
template <typename T, int HD, int BN>
__device__ __forceinline__ void mma_abt(float (&acc)[BN / 8][4], const T* a_tile, const T* b_tile,
                                        int lane) {
  constexpr int LDS = MmaTile<HD>::LDS;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    unsigned a[4];
    ldmatrix_x4(a, a_tile + a_row(lane) * LDS + kk * 16 + a_col(lane));
#pragma unroll
    for (int nn = 0; nn < BN / 16; ++nn) {
      unsigned b[4];
      ldmatrix_x4(b, b_tile + (nn * 16 + bnk_row(lane)) * LDS + kk * 16 + bnk_col(lane));
      mma16816<T>(acc[2 * nn], a, b[0], b[1]);
      mma16816<T>(acc[2 * nn + 1], a, b[2], b[3]);
    }
  }
}

// acc[HD/8][4] += P (16 x BK, from accumulators) * B (BK rows x HD of b_tile).
template <typename T, int HD, int BK>
__device__ __forceinline__ void mma_pb(float (&acc)[HD / 8][4], const float (&p)[BK / 8][4],
                                       const T* b_tile, int lane) {
  constexpr int LDS = MmaTile<HD>::LDS;
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    unsigned a[4];
    acc_to_a<T>(a, p, kk);
#pragma unroll
    for (int dn = 0; dn < HD / 16; ++dn) {
      unsigned b[4];
      ldmatrix_x4_trans(b, b_tile + (kk * 16 + bkn_row(lane)) * LDS + dn * 16 + bkn_col(lane));
      mma16816<T>(acc[2 * dn], a, b[0], b[1]);
      mma16816<T>(acc[2 * dn + 1], a, b[2], b[3]);
    }
  }
}

// Writes a warp's 16 x HD accumulator tile (times the row factors) into its
// rows of a shared staging tile, as T.
template <typename T, int HD>
__device__ __forceinline__ void stage_acc(T* tile, const float (&acc)[HD / 8][4], float f0,
                                          float f1, int lane) {
  constexpr int LDS = MmaTile<HD>::LDS;
  const int g = lane >> 2;
  const int t = lane & 3;
#pragma unroll
  for (int dt = 0; dt < HD / 8; ++dt) {
    *reinterpret_cast<unsigned*>(tile + g * LDS + dt * 8 + 2 * t) =
        pack2<T>(acc[dt][0] * f0, acc[dt][1] * f0);
    *reinterpret_cast<unsigned*>(tile + (g + 8) * LDS + dt * 8 + 2 * t) =
        pack2<T>(acc[dt][2] * f1, acc[dt][3] * f1);
  }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace tinyllama::cuda::flash
