#pragma once
// dQ summed across the blocks of the fused backward (backward_fused.cu)
// without atomics and in a fixed order, so the result is the same bits on
// every run. Every key block n that sees a query tile adds its share of the
// tile's dQ; the shares go into an fp32 accumulator in global memory in
// DESCENDING n: the block holding the tile's diagonal (n_last) stores its
// share, each block below it waits on the tile's counter until the blocks
// above it are done, adds, and counts on; block 0 adds last and writes the
// tile's dQ itself (inverse RoPE, scale, rounding), so no conversion pass
// follows. Descending n is also the order the blocks reach the tile in: the
// key blocks are launched highest first, and a higher block has fewer query
// tiles before this one, so in steady state nobody waits. A block only ever
// waits on blocks launched before it, which therefore hold an SM or have
// finished: the wait cannot deadlock.
//
// The consumers only stage their share in shared memory (stage_dq_share)
// and go on; the wait, the read-add-write and the count are done by the
// producer warpgroup's idle warps (dq_writer), so the global memory latency
// stays off the tensor cores' path. The counters ([B*H, query tiles], int)
// must be zero when the kernel starts: the delta kernel that runs just
// before it zeroes them.
#include <cstdint>

#include "cuda/flash/params.h"
#include "cuda/flash/ptx.cuh"
#include "cuda/flash/rope_epilogue.cuh"

namespace tinyllama::cuda::flash {

__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// counter += v, ordered after this thread's earlier writes (and, through
// the barrier before it, its group's).
__device__ __forceinline__ void red_release_gpu_add(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The staged share: 64 rows of HD floats, row r's 8-float groups permuted
// by r % 8 so that a warp's accumulator stores (8 rows, the same columns)
// and the writer's float4 reads hit distinct banks.
template <int HD>
__device__ __forceinline__ int dq_stage_index(int row, int col) {
  return row * HD + (col ^ ((row & 7) << 3));
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
  bool last;     // block 0: writes the result
  int* counter;  // the tile's counter: blocks that have added
  float* acc;    // the tile's fp32 accumulator, [64 rows][HD]
  void* out;     // dq at the tile's first row and this head's first column
  std::int64_t ld_out;
  int rows;  // rows of the tile inside the sequence
  int q0;    // the tile's first position
};

// The writer: NT threads (ids wtid 0..NT-1, named barrier bar_id) add one
// staged share into the tile in its turn, or write the tile's dQ.
template <typename T, int HD, int NT>
__device__ __forceinline__ void dq_write_share(const float* stage, const DqShare& s,
                                               const BwdArgs& a, int wtid, int bar_id) {
  if (s.order > 0) {
    if (wtid == 0) {
      while (ld_acquire_gpu(s.counter) < s.order) {
      }
    }
    named_barrier(bar_id, NT);
  }
  constexpr int kQuads = 64 * HD / 4;
  const float2* cs = reinterpret_cast<const float2*>(a.rope);
  for (int i = wtid; i < kQuads; i += NT) {
    const int row = i / (HD / 4);
    const int col = (i % (HD / 4)) * 4;
    if (row >= s.rows) break;  // rows go in order: the rest are past the end too
    float4 v = *reinterpret_cast<const float4*>(stage + dq_stage_index<HD>(row, col));
    float* acc = s.acc + row * HD + col;
    if (s.order > 0) {
      const float4 prev = __ldcg(reinterpret_cast<const float4*>(acc));
      v.x += prev.x;
      v.y += prev.y;
      v.z += prev.z;
      v.w += prev.w;
    }
    if (!s.last) {
      __stcg(reinterpret_cast<float4*>(acc), v);
      continue;
    }
    if (cs != nullptr) {
      const float2* pos = cs + static_cast<std::int64_t>(s.q0 + row) * (HD / 2) + col / 2;
      rope_unrotate(v.x, v.y, pos[0]);
      rope_unrotate(v.z, v.w, pos[1]);
    }
    const uint2 packed = make_uint2(pack2<T>(v.x * a.scale, v.y * a.scale),
                                    pack2<T>(v.z * a.scale, v.w * a.scale));
    *reinterpret_cast<uint2*>(static_cast<T*>(s.out) + row * s.ld_out + col) = packed;
  }
  if (!s.last) {
    __threadfence();
    named_barrier(bar_id, NT);
    if (wtid == 0) red_release_gpu_add(s.counter, 1);
  }
}

}  // namespace tinyllama::cuda::flash
