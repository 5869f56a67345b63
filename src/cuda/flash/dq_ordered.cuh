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
// A block's share may be added by two warpgroups, each its own columns
// (DqShare::arrivals 2): the tile's counter then counts two per block, and
// each waits until both parts of every block above have arrived. The
// counters ([B*H, query tiles], int) must be zero when the kernel starts:
// the delta kernel that runs just before it zeroes them.
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
// the barrier before it, its warpgroup's).
__device__ __forceinline__ void red_release_gpu_add(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Where one block's share of one (query tile, head) goes.
struct DqShare {
  int order;     // how many blocks add before this one (0: the first)
  int arrivals;  // warpgroups per block that add a part of the share (1 or 2)
  bool last;     // block 0: writes the result
  int* counter;  // the tile's counter: arrivals per block that has added
  float* acc;    // the tile's fp32 accumulator at column col0, row stride HD
  void* out;     // dq at the tile's first row, column col0 of this head
  std::int64_t ld_out;
  int rows;  // rows of the tile inside the sequence
  int q0;    // the tile's first position
  int col0;  // the first of the N columns this warpgroup adds
};

// A warpgroup's 64 x N part of the share in the wgmma accumulator layout
// (rows 16w + g and 16w + g + 8, columns 8 dt + 2t and + 1 from col0),
// added into the tile in its turn. bar_id: a named barrier of this
// warpgroup's 128 threads.
template <typename T, int HD, int N>
__device__ __forceinline__ void dq_add_in_order(float (&dq)[N / 8][4], const DqShare& s,
                                                const BwdArgs& a, int warp, int lane, int wtid,
                                                int bar_id) {
  const int g = lane >> 2;
  const int t = lane & 3;
  const int r0 = warp * 16 + g;
  const int r1 = r0 + 8;
  const bool ok0 = r0 < s.rows;
  const bool ok1 = r1 < s.rows;
  if (s.order > 0) {
    if (wtid == 0) {
      while (ld_acquire_gpu(s.counter) < s.order * s.arrivals) {
      }
    }
    named_barrier(bar_id, 128);
#pragma unroll
    for (int dt = 0; dt < N / 8; ++dt) {
      const int col = dt * 8 + 2 * t;
      if (ok0) {
        const float2 v = __ldcg(reinterpret_cast<const float2*>(s.acc + r0 * HD + col));
        dq[dt][0] += v.x;
        dq[dt][1] += v.y;
      }
      if (ok1) {
        const float2 v = __ldcg(reinterpret_cast<const float2*>(s.acc + r1 * HD + col));
        dq[dt][2] += v.x;
        dq[dt][3] += v.y;
      }
    }
  }
  if (s.last) {
    T* out = static_cast<T*>(s.out);
    const float2* cs = reinterpret_cast<const float2*>(a.rope);
#pragma unroll
    for (int dt = 0; dt < N / 8; ++dt) {
      const int col = dt * 8 + 2 * t;
      const int pair = (s.col0 + col) / 2;
      if (ok0) {
        if (cs != nullptr) {
          rope_unrotate(dq[dt][0], dq[dt][1],
                        cs[static_cast<std::int64_t>(s.q0 + r0) * (HD / 2) + pair]);
        }
        *reinterpret_cast<unsigned*>(out + r0 * s.ld_out + col) =
            pack2<T>(dq[dt][0] * a.scale, dq[dt][1] * a.scale);
      }
      if (ok1) {
        if (cs != nullptr) {
          rope_unrotate(dq[dt][2], dq[dt][3],
                        cs[static_cast<std::int64_t>(s.q0 + r1) * (HD / 2) + pair]);
        }
        *reinterpret_cast<unsigned*>(out + r1 * s.ld_out + col) =
            pack2<T>(dq[dt][2] * a.scale, dq[dt][3] * a.scale);
      }
    }
    return;
  }
#pragma unroll
  for (int dt = 0; dt < N / 8; ++dt) {
    const int col = dt * 8 + 2 * t;
    if (ok0) {
      __stcg(reinterpret_cast<float2*>(s.acc + r0 * HD + col), make_float2(dq[dt][0], dq[dt][1]));
    }
    if (ok1) {
      __stcg(reinterpret_cast<float2*>(s.acc + r1 * HD + col), make_float2(dq[dt][2], dq[dt][3]));
    }
  }
  __threadfence();
  named_barrier(bar_id, 128);
  if (wtid == 0) red_release_gpu_add(s.counter, 1);
}

}  // namespace tinyllama::cuda::flash
