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
//                their transpose, full sectors both ways
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
// row-major copy as one store and to a shared tile; then 64 threads a tile
// each read 16 x 4 codes of it as 32-bit words, transpose them in registers
// (byte permutes) and write four 16-byte stores of the transposed copy. The
// bytes move in full sectors both ways. Reading words, not bytes, takes a
// quarter of the shared loads and half the byte shuffles of a byte-by-byte
// gather: the SwiGLU passes that write codes are instruction-bound, and
// this brought them from 3.0 to 3.4 TB/s (forward) and 3.0 to 3.7
// (backward) at B32 S1024 on the H200 (docs/log/2026-11-29.md).
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

// The codes of kVec values (a multiple of 4) as words, four codes a word,
// the first value in the lowest byte; two values a conversion (the x2 form
// of the instruction fp8_code uses, so the same codes). Raises m to their
// max |x| bits.
template <int kVec>
__device__ __forceinline__ void encode_words(const float (&v)[kVec], float s,
                                             __nv_fp8_interpretation_t kind,
                                             unsigned (&w)[kVec / 4], unsigned& m) {
  static_assert(kVec % 4 == 0, "whole words of codes");
#pragma unroll
  for (int q = 0; q < kVec / 4; ++q) {
    unsigned half[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float a = __fmul_rn(v[4 * q + 2 * h], s);
      const float b = __fmul_rn(v[4 * q + 2 * h + 1], s);
      half[h] = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, kind);
    }
    w[q] = half[0] | (half[1] << 16);
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) m = max(m, abs_bits(v[k]));
}

// N words as one store of 4, 8 or 16 bytes.
template <int N>
__device__ __forceinline__ void store_words(std::uint8_t* p, const unsigned (&w)[N]) {
  if constexpr (N == 1) {
    *reinterpret_cast<unsigned*>(p) = w[0];
  } else if constexpr (N == 2) {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else {
    static_assert(N == 4, "4, 8 or 16 bytes");
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// Four rows of four codes (row j in in[j], column k in byte k) as four
// columns (column k in out[k], row j in byte j).
__device__ __forceinline__ void transpose_4x4_codes(const unsigned (&in)[4], unsigned (&out)[4]) {
  const unsigned r01_lo = __byte_perm(in[0], in[1], 0x5140);  // columns 0, 1 of rows 0, 1
  const unsigned r01_hi = __byte_perm(in[0], in[1], 0x7362);  // columns 2, 3
  const unsigned r23_lo = __byte_perm(in[2], in[3], 0x5140);
  const unsigned r23_hi = __byte_perm(in[2], in[3], 0x7362);
  out[0] = __byte_perm(r01_lo, r23_lo, 0x5410);
  out[1] = __byte_perm(r01_lo, r23_lo, 0x7632);
  out[2] = __byte_perm(r01_hi, r23_hi, 0x5410);
  out[3] = __byte_perm(r01_hi, r23_hi, 0x7632);
}

// The shared tile: 64 rows of 16 words, padded to 17 so that the
// transposing reads (16 rows apart in one warp) fall in distinct banks.
constexpr int kTileWords = kCastTile / 4 + 1;

// Thread t < 64 of a tile writes columns 4 (t % 16) .. + 3 of rows
// 16 ((t / 16) % 4) .. + 15 as four 16-byte stores of the transposed copy.
template <int kParts>
__device__ __forceinline__ void store_transposed(
    const unsigned (&tile)[kParts][kCastTile][kTileWords], std::int64_t r0, std::int64_t c0,
    std::int64_t part_cols, const Fp8TileOut& o) {
  static_assert(kParts * kCastTile <= kTileThreads, "64 threads a tile");
  const int t = static_cast<int>(threadIdx.x);
  if (t >= kParts * kCastTile) return;
  const int p = t / kCastTile;
  const int word = t % 16;
  const int rows = 16 * ((t / 16) % 4);
  unsigned col[4][4];  // [column k][rows 4q .. 4q + 3]
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    unsigned in[4], out[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) in[j] = tile[p][rows + 4 * q + j][word];
    transpose_4x4_codes(in, out);
#pragma unroll
    for (int k = 0; k < 4; ++k) col[k][q] = out[k];
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    store_words<4>(o.out_t + (c0 + p * part_cols + 4 * word + k) * o.ld_t + r0 + rows, col[k]);
  }
}

// Casts the tiles whose top-left corners are (r0, c0 + p * part_cols), p
// in [0, kParts), of one tensor. produce(i, col, v) fills v[p][k] with the
// value at row r0 + i, column c0 + p * part_cols + col + k (col a multiple
// of kVec). Every thread of the block must call it.
template <int kVec, int kParts, typename Produce>
__device__ __forceinline__ void cast_tiles(Produce&& produce, std::int64_t r0, std::int64_t c0,
                                           std::int64_t part_cols, const Fp8TileOut& o) {
  constexpr int kChunksPerRow = kCastTile / kVec;  // 16-byte loads across one tile row
  constexpr int kRowsPerPass = kTileThreads / kChunksPerRow;
  constexpr int kWords = kVec / 4;
  __shared__ unsigned tile[kParts][kCastTile][kTileWords];
  const int chunk = static_cast<int>(threadIdx.x) % kChunksPerRow;
  const float s = *o.scale;
  unsigned m = 0;
#pragma unroll
  for (int i = static_cast<int>(threadIdx.x) / kChunksPerRow; i < kCastTile; i += kRowsPerPass) {
    float v[kParts][kVec];
    produce(i, chunk * kVec, v);
#pragma unroll
    for (int p = 0; p < kParts; ++p) {
      unsigned w[kWords];
      encode_words<kVec>(v[p], s, o.kind, w, m);
      const std::int64_t col = c0 + p * part_cols + chunk * kVec;
      if (o.out != nullptr) store_words<kWords>(o.out + (r0 + i) * o.ld + col, w);
#pragma unroll
      for (int q = 0; q < kWords; ++q) tile[p][i][chunk * kWords + q] = w[q];
    }
  }
  raise_amax(m, o.amax_bits);
  if (o.out_t == nullptr) return;  // uniform over the block
  __syncthreads();
  store_transposed<kParts>(tile, r0, c0, part_cols, o);
}

// Whether an output copy suits the tiled cast: null, or rows aligned for
// stores of `bytes` bytes.
inline bool tile_store_aligned(const std::uint8_t* codes, std::int64_t ld, int bytes) {
  return codes == nullptr ||
         (reinterpret_cast<std::uintptr_t>(codes) % static_cast<unsigned>(bytes) == 0 &&
          ld % bytes == 0);
}

}  // namespace tinyllama::cuda
