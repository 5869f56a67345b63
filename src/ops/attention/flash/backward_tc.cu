// The tensor-core backward (bf16 / fp16) as two kernels, both recomputing
// P = exp2(S - lse) tile by tile: dK/dV per (key tile, kv head, batch),
// looping over the group's query heads so that GQA's sum over the group
// stays in registers (no atomics), and dQ per (query tile, head, batch).
// Separate kernels keep both deterministic, at the price of computing S and
// dP twice. dQ runs first: its prologue can write D for dK/dV.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/attention/flash/delta_rows.cuh"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/mma_tiles.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"
#include "ops/attention/flash/rope_epilogue.cuh"
#include "ops/attention/flash/tiles.cuh"

namespace tinyllama::cuda::flash {
namespace {

template <typename T, int HD>
struct MmaDkdv {
  // A 32-row query tile at hd 96 and 128 keeps dK, dV, S^T and dP^T in registers.
  static constexpr int BK = 64, BQ = HD > 64 ? 32 : 64, LDS = MmaTile<HD>::LDS;
  static constexpr std::size_t smem =
      static_cast<std::size_t>(2 * BK + 4 * BQ) * LDS * sizeof(T) + 4 * BQ * sizeof(float);
};

// Epilogue: dK (RoPE's inverse rotation where fused, the softmax scale) and
// dV to global memory.
template <typename T, int HD, int LDS, typename Block>
__device__ __forceinline__ void store_dkdv(const BwdArgs& a, const Block& blk, T* s_k, T* s_v,
                                           float (&dk)[HD / 8][4], float (&dv)[HD / 8][4], int warp,
                                           int lane, int t, int key0) {
  // Each warp stages through its own rows of s_k / s_v, which only it has read.
  T* s_dk = s_k + warp * 16 * LDS;
  T* s_dv = s_v + warp * 16 * LDS;
  rope_unrotate_acc<HD>(dk, a.rope, key0, a.seq, t);
  stage_acc<T, HD>(s_dk, dk, a.scale, a.scale, lane);
  stage_acc<T, HD>(s_dv, dv, 1.f, 1.f, lane);
  __syncwarp();
  const std::int64_t row = blk.tok0 + blk.k0 + warp * 16;
  const int valid = blk.k_valid - warp * 16;
  store_warp_rows<T, HD, LDS>(
      static_cast<T*>(a.dk) + row * a.ld_dk + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dk,
      s_dk, valid, a.vec, lane);
  store_warp_rows<T, HD, LDS>(
      static_cast<T*>(a.dv) + row * a.ld_dv + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dv,
      s_dv, valid, a.vec, lane);
}

// Stage `stage` of the dK/dV block (cp.async; the caller commits):
// iteration it's Q and dO tiles, and its lse (threads 0 .. BQ - 1) and D
// (the next BQ). gq, gdo: the block's first token row of q and dout. The
// thread's index is read here, not passed in: as an argument its bounds
// tests compiled otherwise.
template <typename T, int HD, int BQ, int LDS, typename Block>
__device__ __forceinline__ void load_dkdv_stage(const BwdArgs& a, const Block& blk, T* s_q, T* s_do,
                                                float* s_lse, float* s_d, const T* gq, const T* gdo,
                                                int it, int stage) {
  const int tid = static_cast<int>(threadIdx.x);
  const int h = blk.head_of(it, a.group);
  const int q0 = blk.q0_of(it);
  const int valid = min(BQ, a.seq - q0);
  load_tile<T, BQ, HD, LDS>(s_q + stage * BQ * LDS,
                            gq + q0 * a.ldq + static_cast<std::int64_t>(h) * HD, a.ldq, valid,
                            a.vec);
  load_tile<T, BQ, HD, LDS>(s_do + stage * BQ * LDS,
                            gdo + q0 * a.ld_dout + static_cast<std::int64_t>(h) * HD, a.ld_dout,
                            valid, a.vec);
  const std::int64_t bh = bh_row(blk.b, a.heads, h);
  if (tid < BQ) {
    const bool ok = tid < valid;
    cp_async_4(s_lse + stage * BQ + tid, a.lse + bh * a.ld_lse + q0 + (ok ? tid : 0), ok);
  } else if (tid < 2 * BQ) {
    const int r = tid - BQ;
    const bool ok = r < valid;
    cp_async_4(s_d + stage * BQ + r, a.delta + bh * a.seq + q0 + (ok ? r : 0), ok);
  }
}

// The dK/dV block's K and V tiles (cp.async; the caller commits).
template <typename T, int HD, int BK, int LDS, typename Block>
__device__ __forceinline__ void load_k_v(const BwdArgs& a, const Block& blk, T* s_k, T* s_v) {
  load_tile<T, BK, HD, LDS>(s_k,
                            static_cast<const T*>(a.k) + (blk.tok0 + blk.k0) * a.ldk +
                                static_cast<std::int64_t>(blk.kvh) * HD,
                            a.ldk, blk.k_valid, a.vec);
  load_tile<T, BK, HD, LDS>(s_v,
                            static_cast<const T*>(a.v) + (blk.tok0 + blk.k0) * a.ldv +
                                static_cast<std::int64_t>(blk.kvh) * HD,
                            a.ldv, blk.k_valid, a.vec);
}

// P^T = exp2(S^T - lse) in place of S^T and dS^T = P^T (dP^T - D) in place
// of dP^T, for this warp's keys key0 and key1 of the key tile at k0,
// against the query tile at q0 (cl, cd: its lse and D). Masked where the
// tile needs it: keys after the query (causal) and query rows past the
// end, whose zero-filled lse would otherwise give P = 1. For the same code
// as inline: `a` by value (as the kernel holds it), the keys by reference
// and need_mask decided here; each other way compiled the tests otherwise.
template <int BK, int BQ>
__device__ __forceinline__ void scores_to_probs_t(float (&st)[BQ / 8][4], float (&dpt)[BQ / 8][4],
                                                  const float* cl, const float* cd, const BwdArgs a,
                                                  int k0, int q0, const int& key0, const int& key1,
                                                  int t) {
  const bool need_mask = (k0 + BK - 1 > q0) || (q0 + BQ > a.seq);
#pragma unroll
  for (int nt = 0; nt < BQ / 8; ++nt) {
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
      st[nt][e] = p0;
      st[nt][2 + e] = p1;
      dpt[nt][e] = p0 * (dpt[nt][e] - dd);
      dpt[nt][2 + e] = p1 * (dpt[nt][2 + e] - dd);
    }
  }
}

// Grid (key tiles, K, B), the first key tiles (most queries) first. Loops
// over the group's query heads and the query tiles at or after the key tile,
// with Q, dO, lse and D double-buffered. Warp w owns keys k0 + 16w .. +15:
//   S^T = K Q^T, P^T = exp2(S^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - D)
//   dV += P^T dO, dK += dS^T Q (times scale at the end).
template <typename T, int HD>
__global__ void __launch_bounds__(kFlashThreads) flash_bwd_dkdv_mma_kernel(const BwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  using Cfg = MmaDkdv<T, HD>;
  constexpr int BK = Cfg::BK, BQ = Cfg::BQ, LDS = Cfg::LDS;
  extern __shared__ uint4 smem_raw[];
  T* s_k = reinterpret_cast<T*>(smem_raw);
  T* s_v = s_k + BK * LDS;
  T* s_q = s_v + BK * LDS;                                       // [2][BQ][LDS]
  T* s_do = s_q + 2 * BQ * LDS;                                  // [2][BQ][LDS]
  float* s_lse = reinterpret_cast<float*>(s_do + 2 * BQ * LDS);  // [2][BQ]
  float* s_d = s_lse + 2 * BQ;                                   // [2][BQ]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const KeyTileBlock<BK, BQ> blk(a);
  const T* gq = static_cast<const T*>(a.q) + blk.tok0 * a.ldq;
  const T* gdo = static_cast<const T*>(a.dout) + blk.tok0 * a.ld_dout;

  auto load_stage = [&](int it, int stage) {
    load_dkdv_stage<T, HD, BQ, LDS>(a, blk, s_q, s_do, s_lse, s_d, gq, gdo, it, stage);
  };

  load_k_v<T, HD, BK, LDS>(a, blk, s_k, s_v);
  load_stage(0, 0);
  cp_async_commit();

  float dk[HD / 8][4], dv[HD / 8][4];
  zero(dk);
  zero(dv);
  const int key0 = blk.k0 + warp * 16 + g;
  const int key1 = key0 + 8;
  const T* s_kw = s_k + warp * 16 * LDS;
  const T* s_vw = s_v + warp * 16 * LDS;

  for (int it = 0; it < blk.n_it; ++it) {
    const int stage = it & 1;
    if (it + 1 < blk.n_it) {
      load_stage(it + 1, stage ^ 1);  // that stage was released by the last iteration's barrier
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int q0 = blk.q0_of(it);
    const T* cq = s_q + stage * BQ * LDS;
    const T* cdo = s_do + stage * BQ * LDS;
    const float* cl = s_lse + stage * BQ;
    const float* cd = s_d + stage * BQ;

    float st[BQ / 8][4], dpt[BQ / 8][4];
    zero(st);
    zero(dpt);
    mma_abt<T, HD, BQ>(st, s_kw, cq, lane);
    mma_abt<T, HD, BQ>(dpt, s_vw, cdo, lane);

    scores_to_probs_t<BK, BQ>(st, dpt, cl, cd, a, blk.k0, q0, key0, key1, t);
    mma_pb<T, HD, BQ>(dv, st, cdo, lane);
    mma_pb<T, HD, BQ>(dk, dpt, cq, lane);
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

  store_dkdv<T, HD, LDS>(a, blk, s_k, s_v, dk, dv, warp, lane, t, key0);
}

template <typename T, int HD>
struct MmaDq {
  static constexpr int BQ = 64, BK = 64, LDS = MmaTile<HD>::LDS;
  static constexpr std::size_t smem = static_cast<std::size_t>(2 * BQ + 4 * BK) * LDS * sizeof(T);
};

// dS = P (dP - D) in place of S, with P = exp2(S scale - lse) under the
// causal mask: one key tile of this warp's rows (g and g + 8 of its 16).
template <int BK>
__device__ __forceinline__ void scores_to_ds(float (&s)[BK / 8][4], const float (&dp)[BK / 8][4],
                                             float scale_log2, float lse2_0, float lse2_1, float d0,
                                             float d1, bool diag, int k0, int row0, int row1,
                                             int t) {
#pragma unroll
  for (int nt = 0; nt < BK / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = k0 + nt * 8 + 2 * t + e;
      float p0 = exp2f(fmaf(s[nt][e], scale_log2, -lse2_0));
      float p1 = exp2f(fmaf(s[nt][2 + e], scale_log2, -lse2_1));
      if (diag) {
        if (col > row0) p0 = 0.f;
        if (col > row1) p1 = 0.f;
      }
      s[nt][e] = p0 * (dp[nt][e] - d0);  // dS, in place of S
      s[nt][2 + e] = p1 * (dp[nt][2 + e] - d1);
    }
  }
}

// Epilogue: dQ (RoPE's inverse rotation where fused, the softmax scale)
// staged through the warp's own rows of s_q, read only by it, to global.
template <typename T, int HD, int LDS, typename Block>
__device__ __forceinline__ void store_dq(const BwdArgs& a, const Block& blk, T* s_dq,
                                         float (&dq)[HD / 8][4], int warp, int lane, int t,
                                         int row0) {
  rope_unrotate_acc<HD>(dq, a.rope, row0, a.seq, t);
  stage_acc<T, HD>(s_dq, dq, a.scale, a.scale, lane);
  __syncwarp();
  store_warp_rows<T, HD, LDS>(static_cast<T*>(a.dq) + (blk.tok0 + blk.q0 + warp * 16) * a.ld_dq +
                                  static_cast<std::int64_t>(blk.h) * HD,
                              a.ld_dq, s_dq, blk.q_end - (blk.q0 + warp * 16), a.vec, lane);
}

// The dQ block's first tiles: its Q and dO rows, and the first K and V tiles
// (one cp.async group, committed by the caller).
template <typename T, int HD, int BQ, int BK, int LDS, typename Block>
__device__ __forceinline__ void load_dq_tiles(const BwdArgs& a, const Block& blk, T* s_q, T* s_do,
                                              T* s_k, T* s_v, const T* gk, const T* gv) {
  load_tile<T, BQ, HD, LDS>(s_q,
                            static_cast<const T*>(a.q) + (blk.tok0 + blk.q0) * a.ldq +
                                static_cast<std::int64_t>(blk.h) * HD,
                            a.ldq, blk.q_end - blk.q0, a.vec);
  load_tile<T, BQ, HD, LDS>(s_do,
                            static_cast<const T*>(a.dout) + (blk.tok0 + blk.q0) * a.ld_dout +
                                static_cast<std::int64_t>(blk.h) * HD,
                            a.ld_dout, blk.q_end - blk.q0, a.vec);
  load_tile<T, BK, HD, LDS>(s_k, gk, a.ldk, min(BK, a.seq), a.vec);
  load_tile<T, BK, HD, LDS>(s_v, gv, a.ldv, min(BK, a.seq), a.vec);
}

// Grid (query tiles, H, B), longest first. Q and dO stay in shared memory;
// K and V are double-buffered. Warp w owns query rows q0 + 16w .. +15:
//   S = Q K^T, P = exp2(S - lse), dP = dO V^T, dS = P (dP - D), dQ += dS K.
template <typename T, int HD>
__global__ void __maxnreg__(flash_reg_budget(HD, 255, 168, 128))
    flash_bwd_dq_mma_kernel(const BwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  using Cfg = MmaDq<T, HD>;
  constexpr int BQ = Cfg::BQ, BK = Cfg::BK, LDS = Cfg::LDS;
  extern __shared__ uint4 smem_raw[];
  T* s_q = reinterpret_cast<T*>(smem_raw);
  T* s_do = s_q + BQ * LDS;
  T* s_k = s_do + BQ * LDS;     // [2][BK][LDS]
  T* s_v = s_k + 2 * BK * LDS;  // [2][BK][LDS]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const QueryTileBlock<BQ, BK> blk(a);
  const T* gk =
      static_cast<const T*>(a.k) + blk.tok0 * a.ldk + static_cast<std::int64_t>(blk.kvh) * HD;
  const T* gv =
      static_cast<const T*>(a.v) + blk.tok0 * a.ldv + static_cast<std::int64_t>(blk.kvh) * HD;

  load_dq_tiles<T, HD, BQ, BK, LDS>(a, blk, s_q, s_do, s_k, s_v, gk, gv);
  cp_async_commit();

  const int row0 = blk.q0 + warp * 16 + g;
  const int row1 = row0 + 8;
  const std::int64_t bh = bh_row(blk.b, a.heads, blk.h);
  // D, while the tiles above load.
  dq_tile_delta<T, HD, kFlashThreads>(a, bh, blk.tok0 + blk.q0, blk.h, blk.q0, blk.q_end - blk.q0,
                                      tid);
  // Rows past the end get lse 0 and D 0: their P is finite and never stored.
  const float lse2_0 = row0 < a.seq ? a.lse[bh * a.ld_lse + row0] * kLog2e : 0.f;
  const float lse2_1 = row1 < a.seq ? a.lse[bh * a.ld_lse + row1] * kLog2e : 0.f;
  const float d0 = row0 < a.seq ? a.delta[bh * a.seq + row0] : 0.f;
  const float d1 = row1 < a.seq ? a.delta[bh * a.seq + row1] : 0.f;

  float dq[HD / 8][4];
  zero(dq);
  const T* s_qw = s_q + warp * 16 * LDS;
  const T* s_dow = s_do + warp * 16 * LDS;

  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int stage = kt & 1;
    const int k0 = kt * BK;
    if (kt + 1 < blk.n_kt) {
      const int k1 = k0 + BK;
      load_tile<T, BK, HD, LDS>(s_k + (stage ^ 1) * BK * LDS, gk + k1 * a.ldk, a.ldk,
                                min(BK, a.seq - k1), a.vec);
      load_tile<T, BK, HD, LDS>(s_v + (stage ^ 1) * BK * LDS, gv + k1 * a.ldv, a.ldv,
                                min(BK, a.seq - k1), a.vec);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* ck = s_k + stage * BK * LDS;
    const T* cv = s_v + stage * BK * LDS;

    float s[BK / 8][4], dp[BK / 8][4];
    zero(s);
    zero(dp);
    mma_abt<T, HD, BK>(s, s_qw, ck, lane);
    mma_abt<T, HD, BK>(dp, s_dow, cv, lane);

    const bool diag = k0 + BK - 1 > blk.q0;
    scores_to_ds<BK>(s, dp, a.scale_log2, lse2_0, lse2_1, d0, d1, diag, k0, row0, row1, t);
    mma_pb<T, HD, BK>(dq, s, ck, lane);
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

  store_dq<T, HD, LDS>(a, blk, s_q + warp * 16 * LDS, dq, warp, lane, t, row0);
}

}  // namespace

template <typename T, int HD>
void launch_backward_tc(const BwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Kv = MmaDkdv<T, HD>;
  using Q = MmaDq<T, HD>;
  // dQ first: with dq_writes_delta its prologue writes the D that dK/dV reads.
  launch<flash_bwd_dq_mma_kernel<T, HD>>(dim3(tiles(d.seq, Q::BQ), d.heads, d.batch), Q::smem, args,
                                         stream);
  launch<flash_bwd_dkdv_mma_kernel<T, HD>>(dim3(tiles(d.seq, Kv::BK), d.kv_heads, d.batch),
                                           Kv::smem, args, stream);
}

template void launch_backward_tc<__nv_bfloat16, 32>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_tc<__nv_bfloat16, 64>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_tc<__nv_bfloat16, 128>(const BwdArgs&, const FlashDims&,
                                                     cudaStream_t);
template void launch_backward_tc<__half, 32>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_tc<__half, 64>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_tc<__half, 128>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_tc<__nv_bfloat16, 96>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_tc<__half, 96>(const BwdArgs&, const FlashDims&, cudaStream_t);

}  // namespace tinyllama::cuda::flash
