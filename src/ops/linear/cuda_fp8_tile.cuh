#pragma once
// The device side of an FP8 cast, written once for every kernel that casts:
// the cast kernels of cuda_fp8_cast.cu, and the producers that write FP8
// codes of what they compute (the SwiGLU kernels of ops/swiglu/
// cuda_swiglu_fp8.cu, issue 45), so that a producer's codes are the cast
// kernel's codes of the same values, bit for bit.
//
//   fp8_code     x (already scaled) -> code: cvt.rn.satfinite
//   raise_amax   a block's max |x| into a tensor's amax (bit patterns)
//   cast_tiles   64 x 64 tiles of produced values -> row-major codes and
//                their transpose, 16-byte stores both ways
#include <cuda_fp8.h>

#include <cstdint>

#include "device/cuda_vec.cuh"
#include "ops/linear/fp8_format.h"

namespace tinyllama::cuda {

inline __nv_fp8_interpretation_t fp8_interpretation(Fp8Format f) {
  return f == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2;
}

__device__ __forceinline__ std::uint8_t fp8_code(float v, __nv_fp8_interpretation_t kind) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, kind));
}

__device__ __forceinline__ unsigned abs_bits(float v) {
  return __float_as_uint(fabsf(v));
}

// Maximum over the block (any shape, at most 1024 threads) of non-negative
// floats' bit patterns; the result is valid in thread 0.
__device__ __forceinline__ unsigned block_max_bits(unsigned v) {
  __shared__ unsigned partial[32];
  const int tid = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  const int threads = static_cast<int>(blockDim.x * blockDim.y);
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((tid & 31) == 0) partial[tid >> 5] = v;
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < (threads + 31) / 32; ++w) v = max(v, partial[w]);
  }
  return v;
}

// Raises *amax_bits to the block's maximum (a no-op for a null pointer or
// a block of zeroes); every thread of the block must call it.
__device__ __forceinline__ void raise_amax(unsigned m, unsigned* amax_bits) {
  if (amax_bits == nullptr) return;  // uniform over the grid
  m = block_max_bits(m);
  if (threadIdx.x == 0 && threadIdx.y == 0 && m != 0) atomicMax(amax_bits, m);
}

// Vec codes as one store: 1, 2, 4, 8 or 16 bytes.
template <int Vec>
__device__ __forceinline__ void store_codes(std::uint8_t* p, const std::uint8_t (&c)[Vec]) {
  union {
    typename RawWord<Vec == 1 ? 2 : Vec>::type raw;
    std::uint8_t b[Vec == 1 ? 2 : Vec];
  } pk;
  if constexpr (Vec == 1) {
    *p = c[0];
  } else {
#pragma unroll
    for (int i = 0; i < Vec; ++i) pk.b[i] = c[i];
    *reinterpret_cast<decltype(pk.raw)*>(p) = pk.raw;
  }
}

// v rounded to T and back: the value a kernel that stores v as T leaves
// for the cast that reads it.
template <typename T>
__device__ __forceinline__ float through(float v) {
  return to_f32(from_f32<T>(v));
}

// ---- 64 x 64 tiles -------------------------------------------------------------------

// A block of kTileThreads threads casts one tile of kCastTile x kCastTile
// values (or kParts such tiles of one tensor, side by side). Each thread
// takes 16 bytes of input at a time and writes their codes to the
// row-major copy as one store and to a shared tile; then each thread
// gathers kGather codes of one tile column and writes them as one 16-byte
// store of the transposed copy. The bytes move in full sectors both ways.
constexpr int kCastTile = 64;
constexpr int kTileThreads = 256;
constexpr int kGather = 16;  // codes per transposed store: 16 bytes

// Where a tiled cast writes, and with which scale.
struct Fp8TileOut {
  const float* scale = nullptr;  // x * scale -> code
  __nv_fp8_interpretation_t kind = __NV_E4M3;
  std::uint8_t* out = nullptr;  // row-major codes, or null
  std::int64_t ld = 0;
  std::uint8_t* out_t = nullptr;  // the transpose, or null
  std::int64_t ld_t = 0;
  unsigned* amax_bits = nullptr;  // raised to max |x| when not null
};

// Casts the tiles whose top-left corners are (r0, c0 + p * part_cols), p
// in [0, kParts), of one tensor. produce(i, col, v) fills v[p][k] with the
// value at row r0 + i, column c0 + p * part_cols + col + k (col a multiple
// of kVec). Every thread of the block must call it.
template <int kVec, int kParts, typename Produce>
__device__ __forceinline__ void cast_tiles(Produce&& produce, std::int64_t r0, std::int64_t c0,
                                           std::int64_t part_cols, const Fp8TileOut& o) {
  constexpr int kChunksPerRow = kCastTile / kVec;  // 16-byte loads across one tile row
  constexpr int kRowsPerPass = kTileThreads / kChunksPerRow;
  // Rows 8 bytes apart from a multiple of 8: the row-major store's alignment.
  __shared__ __align__(16) std::uint8_t tile[kParts][kCastTile][kCastTile + 8];
  const int chunk = static_cast<int>(threadIdx.x) % kChunksPerRow;
  const float s = *o.scale;
  unsigned m = 0;
#pragma unroll
  for (int i = static_cast<int>(threadIdx.x) / kChunksPerRow; i < kCastTile; i += kRowsPerPass) {
    float v[kParts][kVec];
    produce(i, chunk * kVec, v);
#pragma unroll
    for (int p = 0; p < kParts; ++p) {
      std::uint8_t c[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        c[k] = fp8_code(__fmul_rn(v[p][k], s), o.kind);
        m = max(m, abs_bits(v[p][k]));
      }
      const std::int64_t col = c0 + p * part_cols + chunk * kVec;
      if (o.out != nullptr) store_codes<kVec>(o.out + (r0 + i) * o.ld + col, c);
      store_codes<kVec>(&tile[p][i][chunk * kVec], c);
    }
  }
  raise_amax(m, o.amax_bits);
  if (o.out_t == nullptr) return;  // uniform over the block
  __syncthreads();
  // Thread t writes out_t's row c0 + (t % 64), codes r0 + 16 * (t / 64) on:
  // a warp reads 32 neighbouring bytes of each tile row (no bank conflict).
  const int col = static_cast<int>(threadIdx.x) % kCastTile;
  const int part = static_cast<int>(threadIdx.x) / kCastTile;
#pragma unroll
  for (int p = 0; p < kParts; ++p) {
    std::uint8_t c[kGather];
#pragma unroll
    for (int k = 0; k < kGather; ++k) c[k] = tile[p][part * kGather + k][col];
    store_codes<kGather>(o.out_t + (c0 + p * part_cols + col) * o.ld_t + r0 + part * kGather, c);
  }
}

// Whether an output copy suits the tiled cast: null, or rows aligned for
// stores of `bytes` bytes.
inline bool tile_store_aligned(const std::uint8_t* codes, std::int64_t ld, int bytes) {
  return codes == nullptr ||
         (reinterpret_cast<std::uintptr_t>(codes) % static_cast<unsigned>(bytes) == 0 &&
          ld % bytes == 0);
}

}  // namespace tinyllama::cuda
