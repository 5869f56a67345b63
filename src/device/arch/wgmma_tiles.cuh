#pragma once
// Tiles in the 128-byte-swizzled layout the wgmma descriptors read
// (wgmma.cuh): a block of NTHREADS fills a ROWS x HD tile from global memory
// with cp.async (rows past `valid` become zeros), and a warpgroup stages
// its fp32 accumulators into such a tile as T and writes its rows back.
// Only for 16-byte aligned rows; the callers keep the Ampere kernels for
// the others.
#include <cstdint>

#include "device/arch/ptx.cuh"
#include "device/arch/wgmma.cuh"

namespace tinyllama::cuda::arch {

// The first swizzle-atom boundary (1024 bytes) at or after the dynamic
// shared memory's start: the kernels ask for one atom of slack.
__device__ __forceinline__ unsigned char* align_atom(unsigned char* raw) {
  const unsigned addr = smem_u32(raw);
  return raw + (((addr + kSwizzleAtomBytes - 1) & ~(kSwizzleAtomBytes - 1u)) - addr);
}

template <typename T, int ROWS, int HD, int NTHREADS>
__device__ __forceinline__ void load_tile_sw128(unsigned char* dst, const T* src, std::int64_t ld,
                                                int valid, int tid) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = HD / kPer;
  constexpr int kChunks = ROWS * kChunksPerRow;
  static_assert(kChunks % NTHREADS == 0, "tile must split evenly over the block");
#pragma unroll
  for (int i = 0; i < kChunks / NTHREADS; ++i) {
    const int c = tid + i * NTHREADS;
    const int r = c / kChunksPerRow;
    const int chunk = c % kChunksPerRow;
    const bool ok = r < valid;
    cp_async_16(dst + sw128_offset(ROWS, r, chunk), src + (ok ? r * ld + chunk * kPer : 0), ok);
  }
}

// A warpgroup's 64 x HD accumulators (rows 16w + g and 16w + g + 8 of warp
// w, as wgmma leaves them) times the row factors, into rows [0, 64) of a
// swizzled tile of `rows` rows starting at `tile`.
template <typename T, int HD>
__device__ __forceinline__ void stage_acc_sw128(unsigned char* tile, int rows,
                                                const float (&acc)[HD / 8][4], float f0, float f1,
                                                int warp, int lane) {
  const int r0 = warp * 16 + (lane >> 2);
  const int t = lane & 3;
#pragma unroll
  for (int dt = 0; dt < HD / 8; ++dt) {
    // Column dt * 8 + 2t: chunk dt, byte 4t within it.
    *reinterpret_cast<unsigned*>(tile + sw128_offset(rows, r0, dt) + 4 * t) =
        pack2<T>(acc[dt][0] * f0, acc[dt][1] * f0);
    *reinterpret_cast<unsigned*>(tile + sw128_offset(rows, r0 + 8, dt) + 4 * t) =
        pack2<T>(acc[dt][2] * f1, acc[dt][3] * f1);
  }
}

// The 128 threads of a warpgroup copy rows [0, valid) of 64 staged rows to
// global memory (dst: the first row, row stride ld), 16 bytes at a time.
template <typename T, int HD>
__device__ __forceinline__ void store_rows_sw128(T* dst, std::int64_t ld, const unsigned char* tile,
                                                 int rows, int valid, int wtid) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = HD / kPer;
#pragma unroll
  for (int i = 0; i < 64 * kChunksPerRow / 128; ++i) {
    const int c = wtid + 128 * i;
    const int r = c / kChunksPerRow;
    const int chunk = c % kChunksPerRow;
    if (r < valid) {
      *reinterpret_cast<uint4*>(dst + r * ld + chunk * kPer) =
          *reinterpret_cast<const uint4*>(tile + sw128_offset(rows, r, chunk));
    }
  }
}

}  // namespace tinyllama::cuda::arch
