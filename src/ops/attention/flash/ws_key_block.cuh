#pragma once
// The steps the warp-specialised key-block backward kernels share
// (backward_ws.cu's dK/dV kernel and backward_fused.cu's dK/dV/dQ kernel):
// a block owns BK keys of one kv head; a producer thread loads K and V once
// and streams the Q and dO tiles of every (query head, query tile) pair by
// TMA into STAGES stages; each consumer warpgroup owns 64 of the keys and,
// per tile,
//   S^T = K Q^T, dP^T = V dO^T                      (ws_scores_t)
//   P^T = exp2(S^T - lse), dS^T = P^T (dP^T - D)    (ws_probs_t, with ws_row_stats)
//   dV += P^T dO, dK += dS^T Q                       (ws_dv_dk)
// waiting for the stage (ws_wait_stage) and for each group (ws_wait_scores,
// ws_wait_dv_dk) and releasing the stage (ws_release_stage), and at the end
// writes its rows of dK and dV (ws_store_dkdv); ws_init_barriers sets up
// the barriers. Shared memory: K and V of BK rows, then the Q stages, then
// the dO stages, all in the 128-byte swizzle the wgmma descriptors read.
#include <cuda.h>

#include <cstdint>

#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/mma_tiles.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"
#include "ops/attention/flash/rope_epilogue.cuh"

namespace tinyllama::cuda::flash {

#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// Barrier set-up (one thread; the caller adds its own and fences): K and V
// landed, and per stage its Q and dO landed and the stage free again.
template <int STAGES>
__device__ __forceinline__ void ws_init_barriers(std::uint64_t* kv_full, std::uint64_t* full,
                                                 std::uint64_t* empty) {
  mbar_init(kv_full, 1);
  for (int s = 0; s < STAGES; ++s) {
    mbar_init(full + s, 1);
    mbar_init(empty + s, 2);  // one arrival per consumer warpgroup
  }
}

// A consumer waits for stage it % STAGES to hold iteration it's Q and dO,
// even where it has nothing to add (every key of it after every query of
// the tile, or past the sequence): one that released stages without
// waiting could run a lap ahead and complete a phase of `empty` with its
// own two arrivals, and the producer's parity wait would then miss the
// phase it waits for.
template <int STAGES>
__device__ __forceinline__ void ws_wait_stage(std::uint64_t* full, int it) {
  mbar_wait(full + it % STAGES, (it / STAGES) & 1);
}

// Every warp of consumer c is done with the Q / dO stage: release it once.
__device__ __forceinline__ void ws_release_stage(std::uint64_t* empty, int c, int wtid) {
  named_barrier(1 + c, 128);
  if (wtid == 0) mbar_arrive(empty);
}

// Waits for ws_scores_t's group: S^T and dP^T are the registers' again.
template <int BQ>
__device__ __forceinline__ void ws_wait_scores(float (&st)[BQ / 8][4], float (&dpt)[BQ / 8][4]) {
  wgmma_wait<0>();
  fence_regs(st);
  fence_regs(dpt);
}

// Waits for ws_dv_dk's group: dV, dK and the fragments it read are the
// registers' again.
template <int HD, int BQ>
__device__ __forceinline__ void ws_wait_dv_dk(float (&dv)[HD / 8][4], float (&dk)[HD / 8][4],
                                              unsigned (&p)[BQ / 16][4],
                                              unsigned (&ds)[BQ / 16][4]) {
  wgmma_wait<0>();
  fence_regs(dv);
  fence_regs(dk);
  fence_regs(p);
  fence_regs(ds);
}

// The producer thread: K and V into s_k / s_v (kv_full), then for every
// iteration the Q and dO tiles into stage it % STAGES (full), once the
// consumers have released it (empty).
template <int HD, int BK, int BQ, int STAGES>
__device__ __forceinline__ void ws_produce(const CUtensorMap* tq, const CUtensorMap* tk,
                                           const CUtensorMap* tv, const CUtensorMap* tdo,
                                           const KeyTileBlock<BK, BQ>& blk, const BwdArgs& a,
                                           unsigned char* s_k, unsigned char* s_v,
                                           unsigned char* s_q, unsigned char* s_do,
                                           std::uint64_t* kv_full, std::uint64_t* full,
                                           std::uint64_t* empty) {
  constexpr int kKvBytes = BK * HD * 2;
  constexpr int kQBytes = BQ * HD * 2;
  const int k_row = static_cast<int>(blk.tok0) + blk.k0;
  mbar_expect_tx(kv_full, 2 * kKvBytes);
  for (int cb = 0; cb < HD / 64; ++cb) {
    tma_load_2d(s_k + cb * BK * kSwizzleRowBytes, tk, blk.kvh * HD + cb * 64, k_row, kv_full);
    tma_load_2d(s_v + cb * BK * kSwizzleRowBytes, tv, blk.kvh * HD + cb * 64, k_row, kv_full);
  }
  for (int it = 0; it < blk.n_it; ++it) {
    const int stage = it % STAGES;
    if (it >= STAGES) mbar_wait(empty + stage, ((it / STAGES) - 1) & 1);
    const int h = blk.head_of(it, a.group);
    const int row = static_cast<int>(blk.tok0) + blk.q0_of(it);
    mbar_expect_tx(full + stage, 2 * kQBytes);
    for (int cb = 0; cb < HD / 64; ++cb) {
      tma_load_2d(s_q + stage * kQBytes + cb * BQ * kSwizzleRowBytes, tq, h * HD + cb * 64, row,
                  full + stage);
      tma_load_2d(s_do + stage * kQBytes + cb * BQ * kSwizzleRowBytes, tdo, h * HD + cb * 64, row,
                  full + stage);
    }
  }
}
#endif

// S^T = K Q^T and dP^T = V dO^T for one consumer's 64 keys (k_addr / v_addr:
// its first row of the BK-row K and V tiles), issued and committed as one
// group; the caller waits.
template <typename T, int HD, int BK, int BQ>
__device__ __forceinline__ void ws_scores_t(float (&st)[BQ / 8][4], float (&dpt)[BQ / 8][4],
                                            unsigned k_addr, unsigned v_addr, unsigned q_addr,
                                            unsigned do_addr) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const unsigned a_at = (kk >> 2) * BK * kSwizzleRowBytes + (kk & 3) * 32;
    const unsigned b_at = (kk >> 2) * BQ * kSwizzleRowBytes + (kk & 3) * 32;
    wgmma_ss<T, BQ, 0, 0>(st, sw128_desc(k_addr + a_at, 16, kSwizzleAtomBytes),
                          sw128_desc(q_addr + b_at, 16, kSwizzleAtomBytes), kk > 0 ? 1 : 0);
  }
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const unsigned a_at = (kk >> 2) * BK * kSwizzleRowBytes + (kk & 3) * 32;
    const unsigned b_at = (kk >> 2) * BQ * kSwizzleRowBytes + (kk & 3) * 32;
    wgmma_ss<T, BQ, 0, 0>(dpt, sw128_desc(v_addr + a_at, 16, kSwizzleAtomBytes),
                          sw128_desc(do_addr + b_at, 16, kSwizzleAtomBytes), kk > 0 ? 1 : 0);
  }
  wgmma_commit();
#endif
}

// lse (in the exp2 domain) and D of this thread's query columns of the tile
// at q0 (columns 8 nt + 2t + e); 0 past the sequence.
template <int BQ>
__device__ __forceinline__ void ws_row_stats(float (&lse2)[BQ / 8][2], float (&dd)[BQ / 8][2],
                                             const BwdArgs& a, std::int64_t bh, int q0, int t) {
#pragma unroll
  for (int nt = 0; nt < BQ / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int qi = q0 + nt * 8 + 2 * t + e;
      const bool ok = qi < a.seq;
      lse2[nt][e] = ok ? a.lse[bh * a.ld_lse + qi] * kLog2e : 0.f;
      dd[nt][e] = ok ? a.delta[bh * a.seq + qi] : 0.f;
    }
  }
}

// P^T and dS^T from the score accumulators, packed as A fragments (p[kb],
// ds[kb]: query columns 16 kb .. 16 kb + 15). need_mask: zero keys after
// the query (causal, key0 / key0 + 8 this thread's two keys) and queries
// past the sequence.
template <typename T, int BQ>
__device__ __forceinline__ void ws_probs_t(const float (&st)[BQ / 8][4],
                                           const float (&dpt)[BQ / 8][4],
                                           const float (&lse2)[BQ / 8][2],
                                           const float (&dd)[BQ / 8][2], unsigned (&p)[BQ / 16][4],
                                           unsigned (&ds)[BQ / 16][4], const BwdArgs& a, int q0,
                                           int key0, bool need_mask, int t) {
  const int key1 = key0 + 8;
#pragma unroll
  for (int nt = 0; nt < BQ / 8; ++nt) {
    float pv[4], dsv[4];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int qi = q0 + nt * 8 + 2 * t + e;
      float p0 = exp2f(fmaf(st[nt][e], a.scale_log2, -lse2[nt][e]));
      float p1 = exp2f(fmaf(st[nt][2 + e], a.scale_log2, -lse2[nt][e]));
      if (need_mask) {
        if (key0 > qi || qi >= a.seq) p0 = 0.f;
        if (key1 > qi || qi >= a.seq) p1 = 0.f;
      }
      pv[e] = p0;
      pv[2 + e] = p1;
      dsv[e] = p0 * (dpt[nt][e] - dd[nt][e]);
      dsv[2 + e] = p1 * (dpt[nt][2 + e] - dd[nt][e]);
    }
    p[nt >> 1][(nt & 1) * 2] = pack2<T>(pv[0], pv[1]);
    p[nt >> 1][(nt & 1) * 2 + 1] = pack2<T>(pv[2], pv[3]);
    ds[nt >> 1][(nt & 1) * 2] = pack2<T>(dsv[0], dsv[1]);
    ds[nt >> 1][(nt & 1) * 2 + 1] = pack2<T>(dsv[2], dsv[3]);
  }
}

// dV += P^T dO and dK += dS^T Q: dO and Q read transposed (their rows are
// the reduction), 64-column blocks BQ rows apart; issued and committed as
// one group, the caller waits.
template <typename T, int HD, int BQ>
__device__ __forceinline__ void ws_dv_dk(float (&dv)[HD / 8][4], float (&dk)[HD / 8][4],
                                         const unsigned (&p)[BQ / 16][4],
                                         const unsigned (&ds)[BQ / 16][4], unsigned q_addr,
                                         unsigned do_addr) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  wgmma_fence();
#pragma unroll
  for (int kb = 0; kb < BQ / 16; ++kb) {
    wgmma_rs<T, HD, 1>(
        dv, p[kb],
        sw128_desc(do_addr + kb * 16 * kSwizzleRowBytes, BQ * kSwizzleRowBytes, kSwizzleAtomBytes),
        1);
  }
#pragma unroll
  for (int kb = 0; kb < BQ / 16; ++kb) {
    wgmma_rs<T, HD, 1>(
        dk, ds[kb],
        sw128_desc(q_addr + kb * 16 * kSwizzleRowBytes, BQ * kSwizzleRowBytes, kSwizzleAtomBytes),
        1);
  }
  wgmma_commit();
#endif
}

#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// Consumer c's 64 rows of dK (inverse RoPE -- in place, its last use --
// then scale) and dV, staged through its own rows of the K and V tiles (no
// other warpgroup may still read them) and stored. key0: this thread's
// first key.
template <typename T, int HD, int BK, int BQ>
__device__ __forceinline__ void ws_store_dkdv(float (&dk)[HD / 8][4], const float (&dv)[HD / 8][4],
                                              const BwdArgs& a, const KeyTileBlock<BK, BQ>& blk,
                                              unsigned char* s_k, unsigned char* s_v, int c,
                                              int key0, int warp, int lane, int wtid) {
  unsigned char* s_dk = s_k + c * 64 * kSwizzleRowBytes;
  unsigned char* s_dv = s_v + c * 64 * kSwizzleRowBytes;
  rope_unrotate_acc<HD>(dk, a.rope, key0, a.seq, lane & 3);
  stage_acc_sw128<T, HD>(s_dk, BK, dk, a.scale, a.scale, warp, lane);
  stage_acc_sw128<T, HD>(s_dv, BK, dv, 1.f, 1.f, warp, lane);
  named_barrier(1 + c, 128);
  const std::int64_t row = blk.tok0 + blk.k0 + c * 64;
  const int valid = blk.k_valid - c * 64;
  store_rows_sw128<T, HD>(
      static_cast<T*>(a.dk) + row * a.ld_dk + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dk,
      s_dk, BK, valid, wtid);
  store_rows_sw128<T, HD>(
      static_cast<T*>(a.dv) + row * a.ld_dv + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dv,
      s_dv, BK, valid, wtid);
}
#endif

}  // namespace tinyllama::cuda::flash
