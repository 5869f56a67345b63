#pragma once
// dQ summed across the blocks of the fused backward (backward_fused.cu)
// without atomics and in a fixed order, so the result is the same bits on
// every run. Every key block n that sees a query tile adds its share of the
// tile's dQ; the shares go into an fp32 accumulator in global memory in
// DESCENDING n: the block holding the tile's diagonal (n_last) stores its
// share, each block below it waits on the tile's counter until the blocks
// above it are done, adds, and counts on; block 0 adds last. A conversion
// kernel after it writes dQ (inverse RoPE, scale, rounding): done inside
// block 0, the read of the sum sat on the longest block's path and ran
// slower. Descending n is also the order the blocks reach the tile in: the
// key blocks are launched highest first, and a higher block has fewer query
// tiles before this one, so in steady state nobody waits. A block only ever
// waits on blocks launched before it, which therefore hold an SM or have
// finished: the wait cannot deadlock.
//
// The consumers only stage their share in shared memory (stage_dq_share)
// and go on; the producer warpgroup's idle warps do the rest, off the
// tensor cores' path: one thread waits for the tile's turn and adds the
// staged share with one bulk asynchronous copy (a plain copy for the
// first), and counts the tile on only once the copy has landed, one tile
// later, so the copies overlap the waits. The counters ([B*H, query
// tiles], int) must be zero when the kernel starts: the delta kernel that runs just before it
// zeroes them.
#include <cstdint>

#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/rope_epilogue.cuh"

namespace tinyllama::cuda::flash {

// The staged share: 64 rows of HD floats, row-major, so that one bulk copy
// moves a whole tile (the accumulator's rows are contiguous too).
template <int HD>
__device__ __forceinline__ int dq_stage_index(int row, int col) {
  return row * HD + col;
}

// A warpgroup's 64 x N part of the share (the wgmma accumulator layout:
// rows 16w + g and + 8, columns col0 + 8 dt + 2t and + 1) into the stage.
template <int HD, int N>
__device__ __forceinline__ void stage_dq_share(float* stage, const float (&dq)[N / 8][4], int col0,
                                               int warp, int lane) {
  const int r0 = warp * 16 + (lane >> 2);
  const int t = lane & 3;
#pragma unroll
  for (int dt = 0; dt < N / 8; ++dt) {
    const int col = col0 + dt * 8 + 2 * t;
    *reinterpret_cast<float2*>(stage + dq_stage_index<HD>(r0, col)) =
        make_float2(dq[dt][0], dq[dt][1]);
    *reinterpret_cast<float2*>(stage + dq_stage_index<HD>(r0 + 8, col)) =
        make_float2(dq[dt][2], dq[dt][3]);
  }
}

// Where one block's share of one (query tile, head) goes.
struct DqShare {
  int order;     // how many blocks add before this one (0: the first)
  int* counter;  // the tile's counter: blocks that have added
  float* acc;    // the tile's fp32 accumulator, [rows][HD]
  int rows;      // rows of the tile inside the sequence
};

}  // namespace tinyllama::cuda::flash
