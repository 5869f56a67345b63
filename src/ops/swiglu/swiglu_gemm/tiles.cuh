#pragma once
// What the SwiGLU GEMM kernels (kernel_two_blocks.cu, kernel_pingpong.cu)
// share: the 128 x 128 tile and its 64-wide k steps, the order blocks walk
// the tiles in, one k step's TMA copies into a stage and its products, and
// the two epilogues on a warpgroup's 64 x 128 accumulator. Device side only;
// swiglu_gemm.cu is the host side.
//
// The B tile of the forward is 64 gate rows and the 64 up rows F below them
// (w_gu is K-major), so each thread holds a gate value and its up value in
// accumulators nt and nt + 8; a tile writes 64 columns of hidden. The
// backward's B is w_down [D, F] as it lies (N-major: two 64-column boxes per
// k step, read transposed by the descriptor); a tile covers 128 columns of
// d_hidden and reads the matching gate and up from global memory.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "device/arch/ptx.cuh"
#include "device/arch/tma.cuh"
#include "device/arch/wgmma.cuh"
#include "device/arch/wgmma_tiles.cuh"
#include "ops/swiglu/swiglu_math.cuh"

namespace tinyllama::cuda::swiglu_gemm {

using arch::kSwizzleAtomBytes;
using arch::kSwizzleRowBytes;
using arch::smem_u32;
using arch::sw128_desc;

constexpr int kBM = 128;  // rows of a block's tile (tokens)
constexpr int kBN = 128;  // columns of the accumulator tile
constexpr int kBK = 64;   // one 128-byte swizzled k step
constexpr int kATileBytes = kBM * kBK * 2;
constexpr int kBTileBytes = kBN * kBK * 2;
constexpr int kStageBytes = kATileBytes + kBTileBytes;
// Blocks walk the tiles in groups of this many row tiles, row tile fastest,
// so that the blocks resident at once share their weight tiles in L2.
constexpr int kGroupRows = 16;

enum class Epi { Forward, Backward };

struct EpiArgs {
  int rows;  // N (tokens)
  int ffn;   // F
  int k;     // D, the reduction
  void* gu;  // forward: written; backward: read (gate, up)
  std::int64_t ld_gu;
  void* out;  // forward: hidden [N, F]; backward: d_gate_up [N, 2F]
  std::int64_t ld_out;
};

template <typename T>
__device__ __forceinline__ float2 unpack2(unsigned v);
template <>
__device__ __forceinline__ float2 unpack2<__nv_bfloat16>(unsigned v) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
template <>
__device__ __forceinline__ float2 unpack2<__half>(unsigned v) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

// The tile of block-order index `bid`: groups of kGroupRows row tiles, the
// row tile fastest.
struct TileIndex {
  int tm, tn;
};
__device__ __forceinline__ TileIndex tile_of(int bid, int m_tiles, int n_tiles) {
  const int per_group = kGroupRows * n_tiles;
  const int group = bid / per_group;
  const int first_m = group * kGroupRows;
  const int rows_in_group = min(kGroupRows, m_tiles - first_m);
  return {first_m + (bid % per_group) % rows_in_group, (bid % per_group) / rows_in_group};
}

// Tiles down the rows, across the columns, and in all: a forward tile
// writes 64 columns of hidden, a backward tile 128 of d_hidden.
__host__ __device__ inline int tiles_m(const EpiArgs& a) {
  return (a.rows + kBM - 1) / kBM;
}
__host__ __device__ inline int tiles_n(Epi e, const EpiArgs& a) {
  return e == Epi::Forward ? a.ffn / 64 : (a.ffn + kBN - 1) / kBN;
}
__host__ __device__ inline int tiles_total(Epi e, const EpiArgs& a) {
  return tiles_m(a) * tiles_n(e, a);
}

#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// The stages' barriers, by thread 0, before anything waits on them: `full`
// completes on the stage's TMA bytes, `empty` on `consumers` arrivals.
template <int Stages>
__device__ __forceinline__ void init_stage_barriers(std::uint64_t* full, std::uint64_t* empty,
                                                    int consumers) {
  for (int s = 0; s < Stages; ++s) {
    arch::mbar_init(&full[s], 1);
    arch::mbar_init(&empty[s], consumers);
  }
  arch::mbar_init_fence();
}

// Starts k step kt of tile (tm, tn) into the stage at a_tile / b_tile,
// completing `bar`'s kStageBytes.
template <Epi E>
__device__ __forceinline__ void issue_kstep(unsigned char* a_tile, unsigned char* b_tile,
                                            const CUtensorMap* ta, const CUtensorMap* tb, int ffn,
                                            int tm, int tn, int kt, std::uint64_t* bar) {
  arch::mbar_expect_tx(bar, kStageBytes);
  arch::tma_load_2d(a_tile, ta, kt * kBK, tm * kBM, bar);
  if constexpr (E == Epi::Forward) {  // 64 gate rows, then their 64 up rows
    arch::tma_load_2d(b_tile, tb, kt * kBK, tn * 64, bar);
    arch::tma_load_2d(b_tile + kBTileBytes / 2, tb, kt * kBK, ffn + tn * 64, bar);
  } else {  // k rows of w_down, two 64-column boxes
    arch::tma_load_2d(b_tile, tb, tn * kBN, kt * kBK, bar);
    arch::tma_load_2d(b_tile + kBTileBytes / 2, tb, tn * kBN + 64, kt * kBK, bar);
  }
}

// acc (+)= the 64 rows of the stage's A tile starting at a_addr times its
// B tile, over one k step; `first` ignores acc's old values.
template <typename T, Epi E>
__device__ __forceinline__ void mma_kstep(float (&acc)[kBN / 8][4], unsigned a_addr,
                                          unsigned b_addr, bool first) {
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk) {
    const std::uint64_t da = sw128_desc(a_addr + kk * 32, 16, kSwizzleAtomBytes);
    const int scale = first && kk == 0 ? 0 : 1;
    if constexpr (E == Epi::Forward) {
      arch::wgmma_ss<T, kBN, 0, 0>(acc, da, sw128_desc(b_addr + kk * 32, 16, kSwizzleAtomBytes),
                                   scale);
    } else {
      arch::wgmma_ss<T, kBN, 0, 1>(acc, da,
                                   sw128_desc(b_addr + kk * 16 * kSwizzleRowBytes,
                                              kBK * kSwizzleRowBytes, kSwizzleAtomBytes),
                                   scale);
    }
  }
}
#endif

// The epilogue of one warpgroup's 64 x 128 accumulator whose first row is
// row0 of the output (lanes of a warpgroup: warp w has rows 16w..16w+15).
template <typename T, Epi E>
__device__ __forceinline__ void epilogue(const float (&acc)[kBN / 8][4], int row0, int tn,
                                         const EpiArgs& a, int wg_tid) {
  // Epilogue: accumulator (nt, e) is row g (+8 for e >= 2) of this warp's
  // 16, column nt * 8 + 2t + (e & 1).
  const int warp = wg_tid >> 5;
  const int lane = wg_tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int row_base = row0 + warp * 16 + g;
  T* gu = static_cast<T*>(a.gu);
  T* out = static_cast<T*>(a.out);
  if constexpr (E == Epi::Forward) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row_base + half * 8;
      if (row >= a.rows) continue;
      T* gu_row = gu + static_cast<std::int64_t>(row) * a.ld_gu;
      T* h_row = out + static_cast<std::int64_t>(row) * a.ld_out;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int c = tn * 64 + nt * 8 + 2 * t;
        const unsigned gp = arch::pack2<T>(acc[nt][2 * half], acc[nt][2 * half + 1]);
        const unsigned up = arch::pack2<T>(acc[nt + 8][2 * half], acc[nt + 8][2 * half + 1]);
        *reinterpret_cast<unsigned*>(gu_row + c) = gp;
        *reinterpret_cast<unsigned*>(gu_row + a.ffn + c) = up;
        const float2 gv = unpack2<T>(gp);
        const float2 uv = unpack2<T>(up);
        *reinterpret_cast<unsigned*>(h_row + c) =
            arch::pack2<T>(swiglu_value(gv.x, uv.x), swiglu_value(gv.y, uv.y));
      }
    }
  } else {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row_base + half * 8;
      if (row >= a.rows) continue;
      const T* gu_row = gu + static_cast<std::int64_t>(row) * a.ld_gu;
      T* d_row = out + static_cast<std::int64_t>(row) * a.ld_out;
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // four column groups at a time: their loads in flight together
        unsigned gp[4], up[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int c = tn * kBN + (q * 4 + i) * 8 + 2 * t;
          gp[i] = c < a.ffn ? *reinterpret_cast<const unsigned*>(gu_row + c) : 0u;
          up[i] = c < a.ffn ? *reinterpret_cast<const unsigned*>(gu_row + a.ffn + c) : 0u;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int nt = q * 4 + i;
          const int c = tn * kBN + nt * 8 + 2 * t;
          if (c >= a.ffn) continue;
          // d_hidden as a stored GEMM output would be: rounded to T.
          const float2 dh = unpack2<T>(arch::pack2<T>(acc[nt][2 * half], acc[nt][2 * half + 1]));
          const float2 gv = unpack2<T>(gp[i]);
          const float2 uv = unpack2<T>(up[i]);
          float dg0, du0, dg1, du1;
          swiglu_grads(dh.x, gv.x, uv.x, dg0, du0);
          swiglu_grads(dh.y, gv.y, uv.y, dg1, du1);
          *reinterpret_cast<unsigned*>(d_row + c) = arch::pack2<T>(dg0, dg1);
          *reinterpret_cast<unsigned*>(d_row + a.ffn + c) = arch::pack2<T>(du0, du1);
        }
      }
    }
  }
}

}  // namespace tinyllama::cuda::swiglu_gemm
