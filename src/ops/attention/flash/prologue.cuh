#pragma once
// The per-block setup every flash kernel starts with, written once: which
// (batch, head, tile) a block owns, which kv head its query head reads
// (GQA), the causal range of tiles it visits, the token index its rows
// start from, and its row in the [B*H, S] lse and D matrices. Two grid
// shapes exist: query-tile blocks (forward and dQ) and key-tile blocks
// (dK/dV). Everything here is integer bookkeeping that inlines away: the
// kernels compile to the same PTX as with the setup written out in each.
//
// The base pointers (base + row * ld + head * HD) stay written out in the
// kernels on purpose: behind a helper function, NVVM simplifies the address
// arithmetic before inlining, the kernels' PTX changes and so do their
// register counts (the forward at hd 128: 229 -> 225).
#include <cmath>
#include <cstdint>

#include "ops/attention/flash/params.h"

namespace tinyllama::cuda::flash {

// Grid (query tiles, H, B), the longest (last) query tiles first. The block
// owns query rows [q0, q_end) of head h and visits key tiles [0, n_kt): the
// tiles that start at or before its last row.
template <int BQ, int BK>
struct QueryTileBlock {
  int h, b;
  int kvh;  // kv head of h: h / group
  int q0, q_end;
  int n_kt;
  std::int64_t tok0;  // token index of (b, position 0)

  template <typename Args>
  __device__ __forceinline__ explicit QueryTileBlock(const Args& a)
      : QueryTileBlock(a, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                       static_cast<int>(blockIdx.z)) {}

  // Grid position (x, head, batch) given, not read from blockIdx (the
  // one-launch backward numbers its blocks itself).
  template <typename Args>
  __device__ __forceinline__ QueryTileBlock(const Args& a, int x, int head, int batch) {
    const int n_qt = (a.seq + BQ - 1) / BQ;
    const int qt = n_qt - 1 - x;
    h = head;
    b = batch;
    kvh = h / a.group;
    q0 = qt * BQ;
    q_end = min(q0 + BQ, a.seq);
    n_kt = (q_end - 1) / BK + 1;
    tok0 = static_cast<std::int64_t>(b) * a.seq;
  }
};

// Grid (key tiles, K, B), the first key tiles (most queries) first. The
// block owns keys [k0, k0 + k_valid) of kv head kvh and runs n_it
// iterations: the group's query heads (outer) times the query tiles at or
// after the key tile (inner, nq of them from tile qt0).
template <int BK, int BQ>
struct KeyTileBlock {
  int kvh, b;
  int k0, k_valid;
  int qt0;  // first query tile with a query >= k0
  int nq;
  int n_it;
  std::int64_t tok0;  // token index of (b, position 0)

  template <typename Args>
  __device__ __forceinline__ explicit KeyTileBlock(const Args& a)
      : KeyTileBlock(a, static_cast<int>(blockIdx.x)) {}

  // Key tile kt instead of blockIdx.x (the fused backward launches the last
  // key tiles first).
  template <typename Args>
  __device__ __forceinline__ KeyTileBlock(const Args& a, int kt)
      : KeyTileBlock(a, kt, static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z)) {}

  // Key tile, kv head and batch given (the one-launch backward).
  template <typename Args>
  __device__ __forceinline__ KeyTileBlock(const Args& a, int kt, int kv_head, int batch) {
    kvh = kv_head;
    b = batch;
    k0 = kt * BK;
    k_valid = min(BK, a.seq - k0);
    const int n_qt = (a.seq + BQ - 1) / BQ;
    qt0 = k0 / BQ;
    nq = n_qt - qt0;
    n_it = a.group * nq;
    tok0 = static_cast<std::int64_t>(b) * a.seq;
  }

  // The query head and the first query row of iteration it.
  __device__ __forceinline__ int head_of(int it, int group) const { return kvh * group + it / nq; }
  __device__ __forceinline__ int q0_of(int it) const { return (qt0 + it % nq) * BQ; }
};

// The row of (batch b, head h) in the [B*H, S] lse and D matrices.
__device__ __forceinline__ std::int64_t bh_row(int b, int heads, int h) {
  return static_cast<std::int64_t>(b) * heads + h;
}

// lse as the forward stores it (natural log) from the online softmax's
// running max m (exp2 domain) and sum l.
__device__ __forceinline__ float lse_from_exp2(float m, float l) {
  return (m + log2f(l)) * kLn2;
}

}  // namespace tinyllama::cuda::flash
