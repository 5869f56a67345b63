#pragma once
// RopeImpl::Fused's forward half, in the flash forward kernels: q and k
// arrive as the QKV GEMM wrote them, and a block rotates the Q and K tiles
// it has loaded, in shared memory, before its products read them. The
// blocks also write the rotated q and k rows, and v's rows copied, where
// the backward reads them (FwdArgs::q_rot, k_rot, v_copy), instead of a
// separate rope kernel before attention. The kernel bench's attention.fwd
// flash+rope; the model keeps the rope kernel, which measured faster at
// every shape but the workshop's (docs/log/2026-11-25.md).
//
// A K tile is read by every query tile at or after it and none of them may
// wait for another block, so each block rotates the K tiles it reads
// itself: a few multiply-adds per element against the tile's two products.
// Each row of q_rot, k_rot and v_copy is written by exactly one block (see
// rope_write_block).
//
// The angles: rope_epilogue.cuh's (cos, sin) table has a row per position,
// twice a bf16 K tile's bytes; read per K tile by every query tile, it
// would dwarf the K tiles' own traffic. So position p's angle is composed
// from rows p & ~63 and p & 63 by the angle-sum formulas (rope_angle): a
// block reads the table's first 64 rows, which stay in L1, and one row per
// 64 positions. Positions below 64 get the table's own values; the others
// are within a rounding of them. The rotation itself is rope_math.cuh's.
// Every path here composes the same way, so the q and k a block attends
// with are the bits it writes out for the backward.
#include <cstdint>

#include "device/cuda_common.cuh"
#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/params.h"
#include "ops/rope/rope_math.cuh"

namespace tinyllama::cuda::flash {

// cos(a + b), sin(a + b) from (cos a, sin a) and (cos b, sin b), each
// product rounded once as spelled out. With a = 0 (row 0 is (1, 0)) it is b.
__device__ __forceinline__ float2 rope_sum(float2 a, float2 b) {
  return make_float2(__fmaf_rn(a.x, b.x, __fmul_rn(-a.y, b.y)),
                     __fmaf_rn(a.y, b.x, __fmul_rn(a.x, b.y)));
}

// The table's entries for pairs [pair, pair + 2 * n) of row `row` as n
// float4 of two (cos, sin) each (16-byte aligned: a row is 4 HD bytes and
// pair is even).
template <int HD>
__device__ __forceinline__ const float4* rope_entries(const float* table, int row, int pair) {
  return reinterpret_cast<const float4*>(table +
                                         2 * (static_cast<std::int64_t>(row) * (HD / 2) + pair));
}

// (cos, sin) of pair `pair` at position pos: rows pos & ~63 and pos & 63.
template <int HD>
__device__ __forceinline__ float2 rope_angle(const float* table, int pos, int pair) {
  const float2* t = reinterpret_cast<const float2*>(table);
  return rope_sum(__ldg(t + static_cast<std::int64_t>(pos & ~63) * (HD / 2) + pair),
                  __ldg(t + static_cast<std::int64_t>(pos & 63) * (HD / 2) + pair));
}

// One 16-bit pair held in a 32-bit word (the lower column in the low half).
template <typename T>
__device__ __forceinline__ unsigned rope_rotate_word(unsigned w, float2 cs) {
  const T* e = reinterpret_cast<const T*>(&w);
  float a = to_f32(e[0]);
  float b = to_f32(e[1]);
  rope_rotate(a, b, cs.x, cs.y);
  return pack2<T>(a, b);
}

// 16 bytes of the row at position pos, from column 2 * pair0 (pair0 even):
// 4 pairs of 16-bit values or 2 of fp32, rotated.
template <typename T, int HD>
__device__ __forceinline__ void rope_rotate_chunk(uint4& x, const float* table, int pos,
                                                  int pair0) {
  const float4* hi = rope_entries<HD>(table, pos & ~63, pair0);
  const float4* lo = rope_entries<HD>(table, pos & 63, pair0);
  const float4 h0 = __ldg(hi);
  const float4 l0 = __ldg(lo);
  const float2 c0 = rope_sum(make_float2(h0.x, h0.y), make_float2(l0.x, l0.y));
  const float2 c1 = rope_sum(make_float2(h0.z, h0.w), make_float2(l0.z, l0.w));
  if constexpr (sizeof(T) == 2) {
    const float4 h1 = __ldg(hi + 1);
    const float4 l1 = __ldg(lo + 1);
    x.x = rope_rotate_word<T>(x.x, c0);
    x.y = rope_rotate_word<T>(x.y, c1);
    x.z = rope_rotate_word<T>(x.z, rope_sum(make_float2(h1.x, h1.y), make_float2(l1.x, l1.y)));
    x.w = rope_rotate_word<T>(x.w, rope_sum(make_float2(h1.z, h1.w), make_float2(l1.z, l1.w)));
  } else {
    float a = __uint_as_float(x.x), b = __uint_as_float(x.y);
    float c = __uint_as_float(x.z), d = __uint_as_float(x.w);
    rope_rotate(a, b, c0.x, c0.y);
    rope_rotate(c, d, c1.x, c1.y);
    x = make_uint4(__float_as_uint(a), __float_as_uint(b), __float_as_uint(c), __float_as_uint(d));
  }
}

// Rows [0, valid) of a ROWS x HD tile in the 128-byte-swizzled layout
// (wgmma_tiles.cuh), row r at position pos0 + r, rotated in place. Thread
// tid of NTHREADS takes chunks c = tid + i * NTHREADS, as load_tile_sw128
// hands them out: a thread that loaded its chunks by cp.async rotates them
// after its own wait, no barrier between. The caller fences the writes for
// the async proxy (wgmma) and synchronises before the tile is read.
template <typename T, int ROWS, int HD, int NTHREADS>
__device__ __forceinline__ void rope_tile_sw128(unsigned char* tile, int valid, const float* table,
                                                int pos0, int tid) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = HD / kPer;
  constexpr int kChunks = ROWS * kChunksPerRow;
#pragma unroll 4
  for (int c = tid; c < kChunks; c += NTHREADS) {
    const int r = c / kChunksPerRow;
    if (r >= valid) break;  // rows grow with c
    const int chunk = c % kChunksPerRow;
    uint4* p = reinterpret_cast<uint4*>(tile + sw128_offset(ROWS, r, chunk));
    uint4 x = *p;
    rope_rotate_chunk<T, HD>(x, table, pos0 + r, chunk * (kPer / 2));
    *p = x;
  }
}

// Rows [0, valid) of a ROWS x HD tile with row stride LDS elements (the
// mma.sync and fp32 kernels' tiles.cuh layout), row r at position pos0 + r,
// rotated in place pair by pair. Any thread may take any pair: the caller
// synchronises after every copy into the tile has landed, and again before
// the tile is read.
template <typename T, int ROWS, int HD, int LDS, int NTHREADS>
__device__ __forceinline__ void rope_tile_padded(T* tile, int valid, const float* table, int pos0,
                                                 int tid) {
  constexpr int kPairsPerRow = HD / 2;
  for (int p = tid; p < ROWS * kPairsPerRow; p += NTHREADS) {
    const int r = p / kPairsPerRow;
    if (r >= valid) break;
    const int i = p % kPairsPerRow;
    T* e = tile + r * LDS + 2 * i;
    float a = to_f32(e[0]);
    float b = to_f32(e[1]);
    const float2 cs = rope_angle<HD>(table, pos0 + r, i);
    rope_rotate(a, b, cs.x, cs.y);
    e[0] = from_f32<T>(a);
    e[1] = from_f32<T>(b);
  }
}

// Rows [0, rows) of one head's HD columns from src (row stride lds) to dst
// (row stride ldd), rotated where table is set (row r at position pos0 +
// r), else copied. vec: every row start allows 16-byte accesses.
template <typename T, int HD, int NTHREADS>
__device__ __forceinline__ void rope_store_rows(T* dst, std::int64_t ldd, const T* src,
                                                std::int64_t lds, int rows, const float* table,
                                                int pos0, bool vec, int tid) {
  if (vec) {
    constexpr int kPer = 16 / static_cast<int>(sizeof(T));
    constexpr int kChunksPerRow = HD / kPer;
    for (int c = tid; c < rows * kChunksPerRow; c += NTHREADS) {
      const int r = c / kChunksPerRow;
      const int col = (c % kChunksPerRow) * kPer;
      uint4 x = *reinterpret_cast<const uint4*>(src + r * lds + col);
      if (table != nullptr) rope_rotate_chunk<T, HD>(x, table, pos0 + r, col / 2);
      *reinterpret_cast<uint4*>(dst + r * ldd + col) = x;
    }
  } else {
    constexpr int kPairsPerRow = HD / 2;
    for (int p = tid; p < rows * kPairsPerRow; p += NTHREADS) {
      const int r = p / kPairsPerRow;
      const int i = p % kPairsPerRow;
      const T* s = src + r * lds + 2 * i;
      T* d = dst + r * ldd + 2 * i;
      if (table == nullptr) {
        d[0] = s[0];
        d[1] = s[1];
        continue;
      }
      float a = to_f32(s[0]);
      float b = to_f32(s[1]);
      const float2 cs = rope_angle<HD>(table, pos0 + r, i);
      rope_rotate(a, b, cs.x, cs.y);
      d[0] = from_f32<T>(a);
      d[1] = from_f32<T>(b);
    }
  }
}

// A query-tile block's share of the write-out (a.rope set): the rotated q
// rows [q0, q_end) of its heads [h0, h0 + nh); and where h0 is the first
// head of its kv group, the rotated k rows and the v rows [q0, q_end) of
// that kv head. Query tiles partition the rows and one block per kv group
// and tile starts at the group's first head, so every row is written once.
template <typename T, int HD, int NTHREADS>
__device__ __forceinline__ void rope_write_block(const FwdArgs& a, std::int64_t tok0, int q0,
                                                 int q_end, int h0, int nh, int tid) {
  const int rows = q_end - q0;
  const std::int64_t t = tok0 + q0;
  for (int j = 0; j < nh; ++j) {
    const std::int64_t col = static_cast<std::int64_t>(h0 + j) * HD;
    rope_store_rows<T, HD, NTHREADS>(static_cast<T*>(a.q_rot) + t * a.ld_qr + col, a.ld_qr,
                                     static_cast<const T*>(a.q) + t * a.ldq + col, a.ldq, rows,
                                     a.rope, q0, a.vec, tid);
  }
  if (h0 % a.group != 0) return;
  const std::int64_t col = static_cast<std::int64_t>(h0 / a.group) * HD;
  rope_store_rows<T, HD, NTHREADS>(static_cast<T*>(a.k_rot) + t * a.ld_kr + col, a.ld_kr,
                                   static_cast<const T*>(a.k) + t * a.ldk + col, a.ldk, rows,
                                   a.rope, q0, a.vec, tid);
  rope_store_rows<T, HD, NTHREADS>(static_cast<T*>(a.v_copy) + t * a.ld_vc + col, a.ld_vc,
                                   static_cast<const T*>(a.v) + t * a.ldv + col, a.ldv, rows,
                                   nullptr, q0, a.vec, tid);
}

}  // namespace tinyllama::cuda::flash
