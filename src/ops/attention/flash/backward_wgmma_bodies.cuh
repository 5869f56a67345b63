#pragma once
// The Hopper backward's two block bodies (bf16 / fp16, sm_90a), shared by
// the kernels that run them: backward_wgmma.cu's dK/dV and dQ kernels (one
// role per launch) and backward_one_launch.cu's kernel (both roles in one
// grid). One warpgroup per block, 64-row tiles on both sides, every product
// on wgmma with operands in 128-byte-swizzled shared memory; the
// probabilities and dS go from the accumulators straight into the A
// registers of the next products.
//   dK/dV, per (key tile, kv head, batch), over the group's heads and the
//   query tiles at or after the key tile:
//     S^T = K Q^T, dP^T = V dO^T, P^T = exp2(S^T - lse), dS^T = P^T (dP^T - D),
//     dV += P^T dO, dK += dS^T Q (times scale at the end);
//   dQ, per (query tile, head, batch) (its prologue can write D):
//     S = Q K^T, dP = dO V^T, dS = P (dP - D), dQ += dS K.
// D = rowsum(dO * O): the dK/dV body reads it from BwdArgs::delta (written
// by the dQ kernel launched before it), or with OWN_DELTA computes it for
// each query tile it visits from the O tile it loads beside dO, so it
// depends on no other block (the one-launch kernel).
// Rows must allow 16-byte accesses (the dispatcher sends others to
// backward_tc.cu).
#include <cstddef>
#include <cstdint>

#include "device/cuda_vec.cuh"
#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/delta_rows.cuh"
#include "ops/attention/flash/mma_tiles.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"
#include "ops/attention/flash/rope_epilogue.cuh"
#include "ops/attention/flash/tiles.cuh"

namespace tinyllama::cuda::flash::wgmma_bwd {

constexpr int kTile = 64;        // rows of every tile, keys and queries
constexpr int kWgThreads = 128;  // one warpgroup

template <int HD>
struct Smem {
  static constexpr int kTileBytes = kTile * HD * 2;
  // dK/dV: K, V, and two stages of Q and dO (OWN_DELTA: and of O); then two
  // stages of lse and D.
  static constexpr std::size_t dkdv(bool own_delta) {
    return kSwizzleAtomBytes + (own_delta ? 8 : 6) * kTileBytes + 4 * kTile * sizeof(float);
  }
  // dQ: Q, dO, and two stages of K and V.
  static constexpr std::size_t dq = kSwizzleAtomBytes + 6 * kTileBytes;
};

// acc (+)= A B^T over the head dim: A and B are 64 x HD swizzled tiles (both
// K-major), acc is 64 x 64.
template <typename T, int HD>
__device__ __forceinline__ void abt(float (&acc)[kTile / 8][4], unsigned a_addr, unsigned b_addr) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const unsigned at = (kk >> 2) * kTile * kSwizzleRowBytes + (kk & 3) * 32;
    wgmma_ss<T, kTile, 0, 0>(acc, sw128_desc(a_addr + at, 16, kSwizzleAtomBytes),
                             sw128_desc(b_addr + at, 16, kSwizzleAtomBytes), kk > 0 ? 1 : 0);
  }
#endif
}

// acc += P B: P (64 x 64) in A fragments, B a 64 x HD swizzled tile read
// transposed (its rows are the reduction).
template <typename T, int HD>
__device__ __forceinline__ void pb(float (&acc)[HD / 8][4], const unsigned (&p)[kTile / 16][4],
                                   unsigned b_addr) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
#pragma unroll
  for (int kb = 0; kb < kTile / 16; ++kb) {
    wgmma_rs<T, HD, 1>(acc, p[kb],
                       sw128_desc(b_addr + kb * 16 * kSwizzleRowBytes, kTile * kSwizzleRowBytes,
                                  kSwizzleAtomBytes),
                       1);
  }
#endif
}

// D of the 64 rows of two swizzled tiles (dO and O) into d[0, 64): two
// threads a row, half the row's 16-byte chunks each, summed in fp32. Rows
// past the end were loaded as zeros and get D = 0.
template <typename T, int HD>
__device__ __forceinline__ void tile_delta_sw128(float* d, const unsigned char* s_do,
                                                 const unsigned char* s_o, int tid) {
  constexpr int kPer = kMaxVec<T>;  // elements of one 16-byte chunk
  constexpr int kChunks = HD / kPer;
  const int r = tid >> 1;
  const int half = tid & 1;
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kChunks / 2; ++i) {
    const int off = sw128_offset(kTile, r, half * (kChunks / 2) + i);
    float g[kPer], o[kPer];
    load_f32<kPer>(reinterpret_cast<const T*>(s_do + off), g);
    load_f32<kPer>(reinterpret_cast<const T*>(s_o + off), o);
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc = fmaf(g[e], o[e], acc);
  }
  acc += __shfl_xor_sync(0xffffffffu, acc, 1);
  if (half == 0) d[r] = acc;
}

// The dK/dV block's steps. None declares an array of its own: an inlined
// function's arrays come first among the caller's, and that changed the
// code (the caller passes them in where needed).

// Stage `stage` of the dK/dV block: iteration it's Q and dO tiles (and with
// OWN_DELTA its O tile), and its lse (the first 64 threads) and, without
// OWN_DELTA, its D (the other 64: the dQ kernel wrote it). cp.async; the
// caller commits. gq, gdo: the block's first token row of q and dout.
template <typename T, int HD, bool OWN_DELTA, typename QStage, typename DoStage, typename OStage>
__device__ __forceinline__ void load_dkdv_stage(const BwdArgs& a,
                                                const KeyTileBlock<kTile, kTile>& blk,
                                                const QStage& s_q, const DoStage& s_do,
                                                const OStage& s_o, float* s_lse, float* s_d,
                                                const T* gq, const T* gdo, int it, int stage) {
  // The thread's index read here, not passed in: as an argument its bounds
  // test below compiled otherwise.
  const int tid = static_cast<int>(threadIdx.x);
  const int h = blk.head_of(it, a.group);
  const int q0 = blk.q0_of(it);
  const int valid = min(kTile, a.seq - q0);
  load_tile_sw128<T, kTile, HD, kWgThreads>(
      s_q(stage), gq + q0 * a.ldq + static_cast<std::int64_t>(h) * HD, a.ldq, valid, tid);
  load_tile_sw128<T, kTile, HD, kWgThreads>(
      s_do(stage), gdo + q0 * a.ld_dout + static_cast<std::int64_t>(h) * HD, a.ld_dout, valid, tid);
  if constexpr (OWN_DELTA) {
    load_tile_sw128<T, kTile, HD, kWgThreads>(s_o(stage),
                                              static_cast<const T*>(a.out) +
                                                  (blk.tok0 + q0) * a.ld_out +
                                                  static_cast<std::int64_t>(h) * HD,
                                              a.ld_out, valid, tid);
  }
  const std::int64_t bh = bh_row(blk.b, a.heads, h);
  if (tid < kTile) {
    const bool ok = tid < valid;
    cp_async_4(s_lse + stage * kTile + tid, a.lse + bh * a.ld_lse + q0 + (ok ? tid : 0), ok);
  } else if (!OWN_DELTA) {
    const int r = tid - kTile;
    const bool ok = r < valid;
    cp_async_4(s_d + stage * kTile + r, a.delta + bh * a.seq + q0 + (ok ? r : 0), ok);
  }
}

// The dK/dV block's K and V tiles (token row kv_row on), cp.async.
template <typename T, int HD>
__device__ __forceinline__ void load_k_v(const BwdArgs& a, const KeyTileBlock<kTile, kTile>& blk,
                                         unsigned char* s_k, unsigned char* s_v,
                                         std::int64_t kv_row, int tid) {
  load_tile_sw128<T, kTile, HD, kWgThreads>(
      s_k, static_cast<const T*>(a.k) + kv_row * a.ldk + static_cast<std::int64_t>(blk.kvh) * HD,
      a.ldk, blk.k_valid, tid);
  load_tile_sw128<T, kTile, HD, kWgThreads>(
      s_v, static_cast<const T*>(a.v) + kv_row * a.ldv + static_cast<std::int64_t>(blk.kvh) * HD,
      a.ldv, blk.k_valid, tid);
}

// S^T = K Q^T and dP^T = V dO^T of one stage, one group, waited for; with
// OWN_DELTA this query tile's D computed while they run, for every warp's
// columns, hence the barrier after.
template <typename T, int HD, bool OWN_DELTA, typename DoStage, typename OStage>
__device__ __forceinline__ void scores_t(float (&st)[kTile / 8][4], float (&dpt)[kTile / 8][4],
                                         unsigned k_addr, unsigned q_addr, unsigned v_addr,
                                         unsigned do_addr, float* s_d, const DoStage& s_do,
                                         const OStage& s_o, int stage, int tid) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  wgmma_fence();
  abt<T, HD>(st, k_addr, q_addr);
  abt<T, HD>(dpt, v_addr, do_addr);
  wgmma_commit();
  if constexpr (OWN_DELTA)
    tile_delta_sw128<T, HD>(s_d + stage * kTile, s_do(stage), s_o(stage), tid);
  wgmma_wait<0>();
  fence_regs(st);
  fence_regs(dpt);
  if constexpr (OWN_DELTA) __syncthreads();
#endif
}

// P^T = exp2(S^T - lse) and dS^T = P^T (dP^T - D) of one stage (cl, cd:
// its lse and D), packed as the A fragments of dV += P^T dO and dK += dS^T
// Q; with need_mask, zero for keys after the query (causal; key0, key1:
// this thread's keys, by reference: as values their tests compiled
// otherwise) and query rows past the end, whose zero-filled lse would
// otherwise give P = 1. pv, dsv: the packing's values, the caller's arrays
// (see above).
template <typename T>
__device__ __forceinline__ void probs_t(unsigned (&p)[kTile / 16][4], unsigned (&ds)[kTile / 16][4],
                                        float (&pv)[4], float (&dsv)[4],
                                        const float (&st)[kTile / 8][4],
                                        const float (&dpt)[kTile / 8][4], const float* cl,
                                        const float* cd, const BwdArgs& a, bool need_mask, int q0,
                                        const int& key0, const int& key1, int t) {
#pragma unroll
  for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int ci = nt * 8 + 2 * t + e;
      const int qi = q0 + ci;
      const float lse2 = cl[ci] * kLog2e;
      const float dd = cd[ci];
      float p0 = exp2f(fmaf(st[nt][e], a.scale_log2, -lse2));
      float p1 = exp2f(fmaf(st[nt][2 + e], a.scale_log2, -lse2));
      if (need_mask) {
        if (key0 > qi || qi >= a.seq) p0 = 0.f;
        if (key1 > qi || qi >= a.seq) p1 = 0.f;
      }
      pv[e] = p0;
      pv[2 + e] = p1;
      dsv[e] = p0 * (dpt[nt][e] - dd);
      dsv[2 + e] = p1 * (dpt[nt][2 + e] - dd);
    }
    p[nt >> 1][(nt & 1) * 2] = pack2<T>(pv[0], pv[1]);
    p[nt >> 1][(nt & 1) * 2 + 1] = pack2<T>(pv[2], pv[3]);
    ds[nt >> 1][(nt & 1) * 2] = pack2<T>(dsv[0], dsv[1]);
    ds[nt >> 1][(nt & 1) * 2 + 1] = pack2<T>(dsv[2], dsv[3]);
  }
}

// dV += P^T dO and dK += dS^T Q, one group, waited for.
template <typename T, int HD>
__device__ __forceinline__ void accumulate_dv_dk(float (&dv)[HD / 8][4], float (&dk)[HD / 8][4],
                                                 unsigned (&p)[kTile / 16][4],
                                                 unsigned (&ds)[kTile / 16][4], unsigned do_addr,
                                                 unsigned q_addr) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  wgmma_fence();
  pb<T, HD>(dv, p, do_addr);
  pb<T, HD>(dk, ds, q_addr);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(dv);
  fence_regs(dk);
  fence_regs(p);
  fence_regs(ds);
#endif
}

// Epilogue: dK (RoPE's inverse rotation where fused, the softmax scale) and
// dV staged through the K and V tiles once every warp's products are done
// with them, then stored. key0: this thread's first key.
template <typename T, int HD>
__device__ __forceinline__ void store_dkdv(const BwdArgs& a, const KeyTileBlock<kTile, kTile>& blk,
                                           float (&dk)[HD / 8][4], const float (&dv)[HD / 8][4],
                                           unsigned char* s_k, unsigned char* s_v,
                                           std::int64_t kv_row, int key0, int warp, int lane, int t,
                                           int tid) {
  __syncthreads();  // K and V are read by every warp's products: done before staging
  rope_unrotate_acc<HD>(dk, a.rope, key0, a.seq, t);
  stage_acc_sw128<T, HD>(s_k, kTile, dk, a.scale, a.scale, warp, lane);
  stage_acc_sw128<T, HD>(s_v, kTile, dv, 1.f, 1.f, warp, lane);
  __syncthreads();
  store_rows_sw128<T, HD>(
      static_cast<T*>(a.dk) + kv_row * a.ld_dk + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dk,
      s_k, kTile, blk.k_valid, tid);
  store_rows_sw128<T, HD>(
      static_cast<T*>(a.dv) + kv_row * a.ld_dv + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dv,
      s_v, kTile, blk.k_valid, tid);
}

template <typename T, int HD, bool OWN_DELTA>
__device__ __forceinline__ void dkdv_body(const BwdArgs& a, const KeyTileBlock<kTile, kTile>& blk) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  using Cfg = Smem<HD>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_atom(smem_raw);
  unsigned char* s_k = smem;
  unsigned char* s_v = smem + Cfg::kTileBytes;
  auto s_q = [&](int stage) { return smem + (2 + stage) * Cfg::kTileBytes; };
  auto s_do = [&](int stage) { return smem + (4 + stage) * Cfg::kTileBytes; };
  auto s_o = [&](int stage) { return smem + (6 + stage) * Cfg::kTileBytes; };  // OWN_DELTA
  float* s_lse = reinterpret_cast<float*>(smem + (OWN_DELTA ? 8 : 6) * Cfg::kTileBytes);  // [2][64]
  float* s_d = s_lse + 2 * kTile;                                                         // [2][64]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const T* gq = static_cast<const T*>(a.q) + blk.tok0 * a.ldq;
  const T* gdo = static_cast<const T*>(a.dout) + blk.tok0 * a.ld_dout;

  auto load_stage = [&](int it, int stage) {
    load_dkdv_stage<T, HD, OWN_DELTA>(a, blk, s_q, s_do, s_o, s_lse, s_d, gq, gdo, it, stage);
  };

  const std::int64_t kv_row = blk.tok0 + blk.k0;
  load_k_v<T, HD>(a, blk, s_k, s_v, kv_row, tid);
  load_stage(0, 0);
  cp_async_commit();

  float dk[HD / 8][4], dv[HD / 8][4];
  zero(dk);
  zero(dv);
  const int key0 = blk.k0 + warp * 16 + g;
  const int key1 = key0 + 8;
  const unsigned k_addr = smem_u32(s_k);
  const unsigned v_addr = smem_u32(s_v);

  for (int it = 0; it < blk.n_it; ++it) {
    const int stage = it & 1;
    __syncthreads();  // every warp is done with the stage the prefetch refills
    if (it + 1 < blk.n_it) load_stage(it + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    const int q0 = blk.q0_of(it);
    const unsigned q_addr = smem_u32(s_q(stage));
    const unsigned do_addr = smem_u32(s_do(stage));
    const float* cl = s_lse + stage * kTile;
    const float* cd = s_d + stage * kTile;

    float st[kTile / 8][4], dpt[kTile / 8][4];
    scores_t<T, HD, OWN_DELTA>(st, dpt, k_addr, q_addr, v_addr, do_addr, s_d, s_do, s_o, stage,
                               tid);

    // Masked: keys after the query (causal) and query rows past the end,
    // whose zero-filled lse would otherwise give P = 1.
    const bool need_mask = (blk.k0 + kTile - 1 > q0) || (q0 + kTile > a.seq);
    unsigned p[kTile / 16][4], ds[kTile / 16][4];
    float pv[4], dsv[4];  // probs_t's, declared here: see there
    probs_t<T>(p, ds, pv, dsv, st, dpt, cl, cd, a, need_mask, q0, key0, key1, t);
    accumulate_dv_dk<T, HD>(dv, dk, p, ds, do_addr, q_addr);
  }

  store_dkdv<T, HD>(a, blk, dk, dv, s_k, s_v, kv_row, key0, warp, lane, t, tid);
#endif
}

// Mainloop, dQ's products from the scores: S = Q K^T and dP = dO V^T (or
// their transposes, from the other side's tiles), one group, waited for.
template <typename T, int HD>
__device__ __forceinline__ void two_products(float (&s)[kTile / 8][4], float (&dp)[kTile / 8][4],
                                             unsigned q_addr, unsigned k_addr, unsigned do_addr,
                                             unsigned v_addr) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  wgmma_fence();
  abt<T, HD>(s, q_addr, k_addr);
  abt<T, HD>(dp, do_addr, v_addr);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(s);
  fence_regs(dp);
#endif
}

// dS = P (dP - D) of the dQ block's rows row0 and row1 over the key tile
// at k0, P = exp2(S - lse) masked after the diagonal (diag: the tile
// crosses it), packed as the A fragments of dQ += dS K. dsv: the packing's
// four values, the caller's array: an inlined function's own arrays come
// first among the caller's, and that changed the code.
template <typename T>
__device__ __forceinline__ void scores_to_ds(unsigned (&ds)[kTile / 16][4], float (&dsv)[4],
                                             const float (&s)[kTile / 8][4],
                                             const float (&dp)[kTile / 8][4], const BwdArgs& a,
                                             float lse2_0, float lse2_1, float d0, float d1,
                                             bool diag, int k0, int row0, int row1, int t) {
#pragma unroll
  for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = k0 + nt * 8 + 2 * t + e;
      float p0 = exp2f(fmaf(s[nt][e], a.scale_log2, -lse2_0));
      float p1 = exp2f(fmaf(s[nt][2 + e], a.scale_log2, -lse2_1));
      if (diag) {
        if (col > row0) p0 = 0.f;
        if (col > row1) p1 = 0.f;
      }
      dsv[e] = p0 * (dp[nt][e] - d0);
      dsv[2 + e] = p1 * (dp[nt][2 + e] - d1);
    }
    ds[nt >> 1][(nt & 1) * 2] = pack2<T>(dsv[0], dsv[1]);
    ds[nt >> 1][(nt & 1) * 2 + 1] = pack2<T>(dsv[2], dsv[3]);
  }
}

// The dQ block's Q and dO rows (q_valid of them from token row q_row, head
// h), cp.async; the caller commits.
template <typename T, int HD>
__device__ __forceinline__ void load_q_do(const BwdArgs& a, int h, unsigned char* s_q,
                                          unsigned char* s_do, std::int64_t q_row, int q_valid,
                                          int tid) {
  load_tile_sw128<T, kTile, HD, kWgThreads>(
      s_q, static_cast<const T*>(a.q) + q_row * a.ldq + static_cast<std::int64_t>(h) * HD, a.ldq,
      q_valid, tid);
  load_tile_sw128<T, kTile, HD, kWgThreads>(
      s_do, static_cast<const T*>(a.dout) + q_row * a.ld_dout + static_cast<std::int64_t>(h) * HD,
      a.ld_dout, q_valid, tid);
}

// Epilogue: dQ (RoPE's inverse rotation where fused, the softmax scale)
// staged through the Q tile once every warp's products are done with it,
// then stored.
template <typename T, int HD>
__device__ __forceinline__ void store_dq(const BwdArgs& a, const QueryTileBlock<kTile, kTile>& blk,
                                         float (&dq)[HD / 8][4], unsigned char* s_q,
                                         std::int64_t q_row, int q_valid, int row0, int warp,
                                         int lane, int t, int tid) {
  __syncthreads();  // Q is read by every warp's products: done before staging
  rope_unrotate_acc<HD>(dq, a.rope, row0, a.seq, t);
  stage_acc_sw128<T, HD>(s_q, kTile, dq, a.scale, a.scale, warp, lane);
  __syncthreads();
  store_rows_sw128<T, HD>(
      static_cast<T*>(a.dq) + q_row * a.ld_dq + static_cast<std::int64_t>(blk.h) * HD, a.ld_dq, s_q,
      kTile, q_valid, tid);
}

template <typename T, int HD>
__device__ __forceinline__ void dq_body(const BwdArgs& a, const QueryTileBlock<kTile, kTile>& blk) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  using Cfg = Smem<HD>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_atom(smem_raw);
  unsigned char* s_q = smem;
  unsigned char* s_do = smem + Cfg::kTileBytes;
  auto s_k = [&](int tile) { return smem + (2 + (tile & 1)) * Cfg::kTileBytes; };
  auto s_v = [&](int tile) { return smem + (4 + (tile & 1)) * Cfg::kTileBytes; };

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const T* gk =
      static_cast<const T*>(a.k) + blk.tok0 * a.ldk + static_cast<std::int64_t>(blk.kvh) * HD;
  const T* gv =
      static_cast<const T*>(a.v) + blk.tok0 * a.ldv + static_cast<std::int64_t>(blk.kvh) * HD;
  auto load_kv = [&](int tile) {
    const int k0 = tile * kTile;
    const int valid = min(kTile, a.seq - k0);
    load_tile_sw128<T, kTile, HD, kWgThreads>(s_k(tile), gk + k0 * a.ldk, a.ldk, valid, tid);
    load_tile_sw128<T, kTile, HD, kWgThreads>(s_v(tile), gv + k0 * a.ldv, a.ldv, valid, tid);
  };

  const std::int64_t q_row = blk.tok0 + blk.q0;
  const int q_valid = blk.q_end - blk.q0;
  load_q_do<T, HD>(a, blk.h, s_q, s_do, q_row, q_valid, tid);
  load_kv(0);
  cp_async_commit();

  const int row0 = blk.q0 + warp * 16 + g;
  const int row1 = row0 + 8;
  const std::int64_t bh = bh_row(blk.b, a.heads, blk.h);
  // D, while the tiles above load.
  dq_tile_delta<T, HD, kWgThreads>(a, bh, q_row, blk.h, blk.q0, q_valid, tid);
  // Rows past the end get lse 0 and D 0: their P is finite and never stored.
  const float lse2_0 = row0 < a.seq ? a.lse[bh * a.ld_lse + row0] * kLog2e : 0.f;
  const float lse2_1 = row1 < a.seq ? a.lse[bh * a.ld_lse + row1] * kLog2e : 0.f;
  const float d0 = row0 < a.seq ? a.delta[bh * a.seq + row0] : 0.f;
  const float d1 = row1 < a.seq ? a.delta[bh * a.seq + row1] : 0.f;
  const unsigned q_addr = smem_u32(s_q);
  const unsigned do_addr = smem_u32(s_do);

  float dq[HD / 8][4];
  zero(dq);
  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // every warp is done with the tiles the prefetch replaces
    if (kt + 1 < blk.n_kt) load_kv(kt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    const unsigned k_addr = smem_u32(s_k(kt));
    const unsigned v_addr = smem_u32(s_v(kt));

    float s[kTile / 8][4], dp[kTile / 8][4];
    two_products<T, HD>(s, dp, q_addr, k_addr, do_addr, v_addr);

    const bool diag = k0 + kTile - 1 > blk.q0;
    unsigned ds[kTile / 16][4];
    float dsv[4];  // scores_to_ds's, declared here: see there
    scores_to_ds<T>(ds, dsv, s, dp, a, lse2_0, lse2_1, d0, d1, diag, k0, row0, row1, t);
    wgmma_fence();
    pb<T, HD>(dq, ds, k_addr);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(dq);
    fence_regs(ds);
  }

  store_dq<T, HD>(a, blk, dq, s_q, q_row, q_valid, row0, warp, lane, t, tid);
#endif
}

}  // namespace tinyllama::cuda::flash::wgmma_bwd
