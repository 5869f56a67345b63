#pragma once
// Tiles, shared by every kernel family: load_tile (a whole block fills a
// ROWS x HD shared tile from global memory, cp.async when every address
// allows 16-byte accesses, else element by element; rows past the sequence
// end become zeros), store_warp_rows (one warp writes its 16 staged rows
// back, dropping rows past the end) and zero (a register tile of
// accumulators).
#include <cstdint>

#include "device/cuda_common.cuh"
#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/params.h"

namespace tinyllama::cuda::flash {

template <typename T>
__device__ __forceinline__ T zero_value() {
  return from_f32<T>(0.f);
}

// Zeroes a register tile (accumulators before their first product).
template <int R, int C>
__device__ __forceinline__ void zero(float (&x)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i) {
#pragma unroll
    for (int j = 0; j < C; ++j) x[i][j] = 0.f;
  }
}

// Rows [0, ROWS) x columns [0, HD) of a tile whose first element is src (row
// stride ld) into dst (row stride LDS); rows >= valid become zeros. The
// vector path is cp.async (asynchronous: the caller commits and waits); the
// fallback, for strides or bases that are not 16-byte aligned, copies
// element by element synchronously.
template <typename T, int ROWS, int HD, int LDS>
__device__ __forceinline__ void load_tile(T* dst, const T* src, std::int64_t ld, int valid,
                                          bool vec) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = HD / kPer;
  constexpr int kChunks = ROWS * kChunksPerRow;
  static_assert(kChunks % kFlashThreads == 0, "tile must split evenly over the block");
  if (vec) {
#pragma unroll
    for (int i = 0; i < kChunks / kFlashThreads; ++i) {
      const int c = static_cast<int>(threadIdx.x) + i * kFlashThreads;
      const int r = c / kChunksPerRow;
      const int col = (c % kChunksPerRow) * kPer;
      const bool ok = r < valid;
      cp_async_16(dst + r * LDS + col, src + (ok ? r * ld + col : 0), ok);
    }
  } else {
    for (int c = static_cast<int>(threadIdx.x); c < ROWS * HD; c += kFlashThreads) {
      const int r = c / HD;
      const int col = c % HD;
      dst[r * LDS + col] = r < valid ? src[r * ld + col] : zero_value<T>();
    }
  }
}

// One warp copies rows [0, valid) of a 16-row staging tile to global memory.
template <typename T, int HD, int LDS>
__device__ __forceinline__ void store_warp_rows(T* dst, std::int64_t ld, const T* src, int valid,
                                                bool vec, int lane) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = HD / kPer;
  if (vec) {
#pragma unroll
    for (int i = 0; i < 16 * kChunksPerRow / 32; ++i) {
      const int c = lane + 32 * i;
      const int r = c / kChunksPerRow;
      const int col = (c % kChunksPerRow) * kPer;
      if (r < valid) {
        *reinterpret_cast<uint4*>(dst + r * ld + col) =
            *reinterpret_cast<const uint4*>(src + r * LDS + col);
      }
    }
  } else {
    for (int c = lane; c < 16 * HD; c += 32) {
      const int r = c / HD;
      if (r < valid) dst[r * ld + c % HD] = src[r * LDS + c % HD];
    }
  }
}

}  // namespace tinyllama::cuda::flash
