#pragma once
// D = rowsum(dO * O), the softmax backward's correction (dS = P (dP - D)),
// written once for both of its users: the separate delta kernels
// (delta.cu) and the dQ kernels' prologue, which computes the D of its own
// query tile (FlashDelta::InDq, the default: one launch fewer per layer).
// Both go through these functions with the same lane layout, so their sums
// run in the same order and D is bit-identical whichever kernel wrote it.
#include <cstdint>

#include "device/cuda_common.cuh"
#include "device/cuda_vec.cuh"
#include "ops/attention/flash/params.h"

namespace tinyllama::cuda::flash {

// The 16-byte layout: kLanes consecutive lanes share one row, kVec elements
// each, and reduce it with kLanes-lane shuffles (32 / kLanes rows a warp).
// A row of kParts vectors takes the power of two of lanes at or above it;
// the lanes past its end add zeros (hd 96: 12 vectors in bf16 on 16 lanes).
template <typename T, int HD>
struct DeltaVec {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  static constexpr int kParts = HD / kVec;
  static constexpr int kLanes = kParts <= 1    ? 1
                                : kParts <= 2  ? 2
                                : kParts <= 4  ? 4
                                : kParts <= 8  ? 8
                                : kParts <= 16 ? 16
                                               : 32;
  static_assert(HD % kVec == 0 && kParts >= 1 && kParts <= 32,
                "a row must be whole 16-byte vectors, at most a warp of them");
};

// Lane `part`'s share of one row: its kVec products, summed in order (0 for
// a lane past the row's end).
template <typename T, int HD>
__device__ __forceinline__ float delta_vec_share(const T* dout_row, const T* out_row, int part) {
  constexpr int kVec = DeltaVec<T, HD>::kVec;
  if constexpr (DeltaVec<T, HD>::kParts != DeltaVec<T, HD>::kLanes) {
    if (part >= DeltaVec<T, HD>::kParts) return 0.f;
  }
  float g[kVec], o[kVec];
  load_f32<kVec>(dout_row + part * kVec, g);
  load_f32<kVec>(out_row + part * kVec, o);
  float acc = 0.f;
#pragma unroll
  for (int e = 0; e < kVec; ++e) acc += g[e] * o[e];
  return acc;
}

// The shares of a row's kLanes lanes summed, widest distance first; every
// lane of the warp must call it (lanes without a row pass 0).
template <typename T, int HD>
__device__ __forceinline__ float delta_vec_reduce(float acc) {
#pragma unroll
  for (int width = DeltaVec<T, HD>::kLanes / 2; width > 0; width /= 2) {
    acc += __shfl_xor_sync(0xffffffffu, acc, width);
  }
  return acc;
}

// One row by one warp with element loads (rows that do not allow 16-byte
// ones): lane l sums elements l, l + 32, ... in order, then the warp sums.
template <typename T>
__device__ __forceinline__ float delta_warp_row(const T* dout_row, const T* out_row, int hd,
                                                int lane) {
  float acc = 0.f;
  for (int d = lane; d < hd; d += 32) acc += to_f32(dout_row[d]) * to_f32(out_row[d]);
  return warp_sum(acc);
}

// The dQ kernels' prologue: D of `rows` consecutive query rows of one head,
// by a whole block of THREADS threads. dout / out: the first row's head
// columns; d: its D (delta + (b * H + h) * S + q0). vec: both row strides
// and bases allow 16-byte loads. The block writes each row once, no
// atomics; the caller's __syncthreads() makes D visible to its own reads.
template <typename T, int HD, int THREADS>
__device__ __forceinline__ void block_delta_rows(float* d, const T* dout, std::int64_t ld_dout,
                                                 const T* out, std::int64_t ld_out, int rows,
                                                 bool vec, int tid) {
  if (vec) {
    constexpr int kLanes = DeltaVec<T, HD>::kLanes;
    constexpr int kRowsPerPass = THREADS / kLanes;
    const int part = tid % kLanes;
    // Not unrolled: a pass at a time keeps the prologue's registers few
    // (unrolled, the mma.sync dQ kernel at hd 32, held to 128 registers,
    // spilled 16 bytes).
#pragma unroll 1
    for (int r0 = 0; r0 < rows; r0 += kRowsPerPass) {  // the same trip count for every lane
      const int r = r0 + tid / kLanes;
      float acc = 0.f;
      if (r < rows) acc = delta_vec_share<T, HD>(dout + r * ld_dout, out + r * ld_out, part);
      acc = delta_vec_reduce<T, HD>(acc);
      if (r < rows && part == 0) d[r] = acc;
    }
  } else {
    const int lane = tid & 31;
#pragma unroll 1
    for (int r = tid >> 5; r < rows; r += THREADS / 32) {  // whole warps take a row
      const float acc = delta_warp_row(dout + r * ld_dout, out + r * ld_out, HD, lane);
      if (lane == 0) d[r] = acc;
    }
  }
}

// A dQ kernel's prologue from its arguments, when it writes D
// (dq_writes_delta): the `rows` query rows of head h from position q0,
// token row `tok` the first of them, bh = b * H + h; then the block's
// barrier, so its own reads of D see them. dK/dV runs after the kernel.
template <typename T, int HD, int THREADS>
__device__ __forceinline__ void dq_tile_delta(const BwdArgs& a, std::int64_t bh, std::int64_t tok,
                                              int h, int q0, int rows, int tid) {
  if (!a.dq_writes_delta) return;  // the same for every thread of the grid
  const std::int64_t col = static_cast<std::int64_t>(h) * HD;
  block_delta_rows<T, HD, THREADS>(
      a.delta + bh * a.seq + q0, static_cast<const T*>(a.dout) + tok * a.ld_dout + col, a.ld_dout,
      static_cast<const T*>(a.out) + tok * a.ld_out + col, a.ld_out, rows, a.vec_delta, tid);
  __syncthreads();
}

}  // namespace tinyllama::cuda::flash
