// The fp32 kernels: the same three kernels as the tensor-core path (forward;
// dQ per query tile, whose prologue can write D; dK/dV per key tile looping
// over the group's query heads) and the same causal tiling, computed with plain FMA (no TF32: fp32
// means fp32). P goes through shared memory, where the product loops read
// it back as float4.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/attention/flash/delta_rows.cuh"
#include "ops/attention/flash/fp32_tiles.cuh"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"
#include "ops/attention/flash/rope_epilogue.cuh"
#include "ops/attention/flash/rope_tiles.cuh"
#include "ops/attention/flash/tiles.cuh"

namespace tinyllama::cuda::flash {
namespace {

template <int HD>
struct F32Fwd {
  static constexpr int BQ = 32, BK = 64, RM = 4, CN = 4, LDS = F32Tile<HD>::LDS, LDP = BK + 4;
  static constexpr std::size_t smem =
      (static_cast<std::size_t>(BQ + 2 * BK) * LDS + BQ * LDP) * sizeof(float);
};

// Softmax: the online softmax over one score tile (exp2 domain, the causal
// mask where the tile crosses the diagonal): P = exp2(S - max) into s_p for
// the P V product, the running max and sum updated, the output so far
// rescaled.
template <int RM, int CN, int OC, int LDP>
__device__ __forceinline__ void softmax_tile_f32(float (&s)[RM][CN], float (&o)[RM][OC],
                                                 float (&m)[RM], float (&l)[RM], float* s_p,
                                                 float scale_log2, bool diag, int k0, int q0,
                                                 int rg, int cg) {
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int row = q0 + rg * RM + i;
    float mx = m[i];
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      float x = s[i][c] * scale_log2;
      if (diag && k0 + cg + 16 * c > row) x = -INFINITY;
      s[i][c] = x;
      mx = fmaxf(mx, x);
    }
    mx = half_warp_max(mx);  // finite: key 0 is never masked
    const float alpha = exp2f(m[i] - mx);
    m[i] = mx;
    float rs = 0.f;
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      const float p = exp2f(s[i][c] - mx);
      s_p[(rg * RM + i) * LDP + cg + 16 * c] = p;
      rs += p;
    }
    l[i] = l[i] * alpha + rs;
#pragma unroll
    for (int n = 0; n < OC; ++n) o[i][n] *= alpha;
  }
}

// Epilogue: O = acc / l to global memory (the row sums over the half-warp
// first) and lse = log(sum exp) per row.
template <int HD, int RM, int OC, typename Block>
__device__ __forceinline__ void store_output_f32(const FwdArgs& a, const Block& blk,
                                                 const float (&o)[RM][OC], const float (&m)[RM],
                                                 float (&l)[RM], int rg, int cg) {
  float inv[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    l[i] = half_warp_sum(l[i]);
    inv[i] = 1.f / l[i];
  }
  f32_store_rows<RM, HD>(static_cast<float*>(a.out) + (blk.tok0 + blk.q0) * a.ldo +
                             static_cast<std::int64_t>(blk.h) * HD,
                         a.ldo, o, inv, rg, cg, blk.q_end - blk.q0, a.vec);
  if (cg == 0) {
    float* lrow = a.lse + bh_row(blk.b, a.heads, blk.h) * a.ld_lse;
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int row = blk.q0 + rg * RM + i;
      if (row < a.seq) lrow[row] = lse_from_exp2(m[i], l[i]);
    }
  }
}

// ROPE: a.rope is set (rope_tiles.cuh); a template argument, so that the
// kernel without it compiles as if it did not exist.
template <int HD, bool ROPE>
__global__ void __launch_bounds__(kFlashThreads) flash_fwd_f32_kernel(const FwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  using Cfg = F32Fwd<HD>;
  constexpr int BQ = Cfg::BQ, BK = Cfg::BK, RM = Cfg::RM, CN = Cfg::CN, LDS = Cfg::LDS,
                LDP = Cfg::LDP, OC = F32Tile<HD>::OC;
  extern __shared__ uint4 smem_raw[];
  float* s_q = reinterpret_cast<float*>(smem_raw);
  float* s_k = s_q + BQ * LDS;
  float* s_v = s_k + BK * LDS;
  float* s_p = s_v + BK * LDS;

  const int tid = static_cast<int>(threadIdx.x);
  const int rg = tid >> 4;
  const int cg = tid & 15;
  const QueryTileBlock<BQ, BK> blk(a);
  const float* gk =
      static_cast<const float*>(a.k) + blk.tok0 * a.ldk + static_cast<std::int64_t>(blk.kvh) * HD;
  const float* gv =
      static_cast<const float*>(a.v) + blk.tok0 * a.ldv + static_cast<std::int64_t>(blk.kvh) * HD;

  load_tile<float, BQ, HD, LDS>(s_q,
                                static_cast<const float*>(a.q) + (blk.tok0 + blk.q0) * a.ldq +
                                    static_cast<std::int64_t>(blk.h) * HD,
                                a.ldq, blk.q_end - blk.q0, a.vec);
  if constexpr (ROPE) {
    rope_write_block<float, HD, kFlashThreads>(a, blk.tok0, blk.q0, blk.q_end, blk.h, 1, tid);
  }

  float o[RM][OC];
  float m[RM], l[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int n = 0; n < OC; ++n) o[i][n] = 0.f;
  }

  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int k0 = kt * BK;
    const int kv = min(BK, a.seq - k0);
    load_tile<float, BK, HD, LDS>(s_k, gk + k0 * a.ldk, a.ldk, kv, a.vec);
    load_tile<float, BK, HD, LDS>(s_v, gv + k0 * a.ldv, a.ldv, kv, a.vec);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    if constexpr (ROPE) {
      if (kt == 0) {
        rope_tile_padded<float, BQ, HD, LDS, kFlashThreads>(s_q, blk.q_end - blk.q0, a.rope, blk.q0,
                                                            tid);
      }
      rope_tile_padded<float, BK, HD, LDS, kFlashThreads>(s_k, kv, a.rope, k0, tid);
      __syncthreads();
    }

    float s[RM][CN];
    zero(s);
    f32_abt<RM, CN, HD>(s, s_q, s_k, rg, cg);

    const bool diag = k0 + BK - 1 > blk.q0;
    softmax_tile_f32<RM, CN, OC, LDP>(s, o, m, l, s_p, a.scale_log2, diag, k0, blk.q0, rg, cg);
    __syncthreads();
    f32_pb<RM, HD, BK, LDP>(o, s_p, s_v, rg, cg);
    __syncthreads();  // K, V and P are overwritten by the next tile
  }

  store_output_f32<HD, RM, OC>(a, blk, o, m, l, rg, cg);
}

// Epilogue: dK (RoPE's inverse rotation where fused, the softmax scale) and
// dV to global memory.
template <int HD, int RM, int OC, typename Block>
__device__ __forceinline__ void store_dkdv_f32(const BwdArgs& a, const Block& blk,
                                               float (&dk)[RM][OC], float (&dv)[RM][OC], int rg,
                                               int cg) {
  rope_unrotate_f32<RM, HD, F32Tile<HD>::W, OC>(dk, a.rope, blk.k0 + rg * RM, a.seq, cg);
  const std::int64_t row0 = blk.tok0 + blk.k0;
  float fk[RM], fv[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    fk[i] = a.scale;
    fv[i] = 1.f;
  }
  f32_store_rows<RM, HD>(
      static_cast<float*>(a.dk) + row0 * a.ld_dk + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dk,
      dk, fk, rg, cg, blk.k_valid, a.vec);
  f32_store_rows<RM, HD>(
      static_cast<float*>(a.dv) + row0 * a.ld_dv + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dv,
      dv, fv, rg, cg, blk.k_valid, a.vec);
}

// The dK/dV block's key tile: its K and V rows (cp.async, committed with the
// first query tile's loads).
template <int HD, int BK, int LDS, typename Block>
__device__ __forceinline__ void load_key_tiles_f32(const BwdArgs& a, const Block& blk, float* s_k,
                                                   float* s_v) {
  load_tile<float, BK, HD, LDS>(s_k,
                                static_cast<const float*>(a.k) + (blk.tok0 + blk.k0) * a.ldk +
                                    static_cast<std::int64_t>(blk.kvh) * HD,
                                a.ldk, blk.k_valid, a.vec);
  load_tile<float, BK, HD, LDS>(s_v,
                                static_cast<const float*>(a.v) + (blk.tok0 + blk.k0) * a.ldv +
                                    static_cast<std::int64_t>(blk.kvh) * HD,
                                a.ldv, blk.k_valid, a.vec);
}

template <int HD>
struct F32Dkdv {
  // Keys are the rows (RM per thread); query columns CN per thread.
  static constexpr int BK = 32, BQ = HD > 64 ? 32 : 64, RM = 4, CN = BQ / 16,
                       LDS = F32Tile<HD>::LDS, LDP = BQ + 4;
  static constexpr std::size_t smem =
      (static_cast<std::size_t>(2 * BK + 2 * BQ) * LDS + 2 * BK * LDP + 2 * BQ) * sizeof(float);
};

template <int HD>
__global__ void __maxnreg__(flash_reg_budget(HD, 200, 168, 128))
    flash_bwd_dkdv_f32_kernel(const BwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  using Cfg = F32Dkdv<HD>;
  constexpr int BK = Cfg::BK, BQ = Cfg::BQ, RM = Cfg::RM, CN = Cfg::CN, LDS = Cfg::LDS,
                LDP = Cfg::LDP, OC = F32Tile<HD>::OC;
  extern __shared__ uint4 smem_raw[];
  float* s_k = reinterpret_cast<float*>(smem_raw);
  float* s_v = s_k + BK * LDS;
  float* s_q = s_v + BK * LDS;
  float* s_do = s_q + BQ * LDS;
  float* s_p = s_do + BQ * LDS;    // [BK][LDP]
  float* s_ds = s_p + BK * LDP;    // [BK][LDP]
  float* s_lse = s_ds + BK * LDP;  // [BQ], exp2 domain
  float* s_d = s_lse + BQ;         // [BQ]

  const int tid = static_cast<int>(threadIdx.x);
  const int rg = tid >> 4;
  const int cg = tid & 15;
  const KeyTileBlock<BK, BQ> blk(a);

  load_key_tiles_f32<HD, BK, LDS>(a, blk, s_k, s_v);

  float dk[RM][OC], dv[RM][OC];
  zero(dk);
  zero(dv);

  for (int it = 0; it < blk.n_it; ++it) {
    const int h = blk.head_of(it, a.group);
    const int q0 = blk.q0_of(it);
    const int valid = min(BQ, a.seq - q0);
    load_tile<float, BQ, HD, LDS>(s_q,
                                  static_cast<const float*>(a.q) + (blk.tok0 + q0) * a.ldq +
                                      static_cast<std::int64_t>(h) * HD,
                                  a.ldq, valid, a.vec);
    load_tile<float, BQ, HD, LDS>(s_do,
                                  static_cast<const float*>(a.dout) + (blk.tok0 + q0) * a.ld_dout +
                                      static_cast<std::int64_t>(h) * HD,
                                  a.ld_dout, valid, a.vec);
    cp_async_commit();
    const std::int64_t bh = bh_row(blk.b, a.heads, h);
    if (tid < BQ) {
      s_lse[tid] = tid < valid ? a.lse[bh * a.ld_lse + q0 + tid] * kLog2e : 0.f;
    } else if (tid < 2 * BQ) {
      const int r = tid - BQ;
      s_d[r] = r < valid ? a.delta[bh * a.seq + q0 + r] : 0.f;
    }
    cp_async_wait<0>();
    __syncthreads();

    float st[RM][CN], dpt[RM][CN];
    zero(st);
    zero(dpt);
    f32_abt<RM, CN, HD>(st, s_k, s_q, rg, cg);
    f32_abt<RM, CN, HD>(dpt, s_v, s_do, rg, cg);

    const bool need_mask = (blk.k0 + BK - 1 > q0) || (q0 + BQ > a.seq);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int key = blk.k0 + rg * RM + i;
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const int ci = cg + 16 * c;
        const int qi = q0 + ci;
        float p = exp2f(fmaf(st[i][c], a.scale_log2, -s_lse[ci]));
        if (need_mask && (key > qi || qi >= a.seq)) p = 0.f;
        s_p[(rg * RM + i) * LDP + ci] = p;
        s_ds[(rg * RM + i) * LDP + ci] = p * (dpt[i][c] - s_d[ci]);
      }
    }
    __syncthreads();
    f32_pb<RM, HD, BQ, LDP>(dv, s_p, s_do, rg, cg);
    f32_pb<RM, HD, BQ, LDP>(dk, s_ds, s_q, rg, cg);
    __syncthreads();  // Q, dO, lse, D, P and dS are overwritten by the next tile
  }

  store_dkdv_f32<HD, RM, OC>(a, blk, dk, dv, rg, cg);
}

// Epilogue: dQ (RoPE's inverse rotation where fused, the softmax scale) to
// global memory.
template <int HD, int RM, int OC, typename Block>
__device__ __forceinline__ void store_dq_f32(const BwdArgs& a, const Block& blk,
                                             float (&dq)[RM][OC], int rg, int cg) {
  rope_unrotate_f32<RM, HD, F32Tile<HD>::W, OC>(dq, a.rope, blk.q0 + rg * RM, a.seq, cg);
  float f[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) f[i] = a.scale;
  f32_store_rows<RM, HD>(static_cast<float*>(a.dq) + (blk.tok0 + blk.q0) * a.ld_dq +
                             static_cast<std::int64_t>(blk.h) * HD,
                         a.ld_dq, dq, f, rg, cg, blk.q_end - blk.q0, a.vec);
}

template <int HD>
struct F32Dq {
  static constexpr int BQ = 32, BK = 64, RM = 4, CN = 4, LDS = F32Tile<HD>::LDS, LDP = BK + 4;
  static constexpr std::size_t smem =
      (static_cast<std::size_t>(2 * BQ + 2 * BK) * LDS + BQ * LDP) * sizeof(float);
};

template <int HD>
__global__ void __launch_bounds__(kFlashThreads) flash_bwd_dq_f32_kernel(const BwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  using Cfg = F32Dq<HD>;
  constexpr int BQ = Cfg::BQ, BK = Cfg::BK, RM = Cfg::RM, CN = Cfg::CN, LDS = Cfg::LDS,
                LDP = Cfg::LDP, OC = F32Tile<HD>::OC;
  extern __shared__ uint4 smem_raw[];
  float* s_q = reinterpret_cast<float*>(smem_raw);
  float* s_do = s_q + BQ * LDS;
  float* s_k = s_do + BQ * LDS;
  float* s_v = s_k + BK * LDS;
  float* s_ds = s_v + BK * LDS;

  const int tid = static_cast<int>(threadIdx.x);
  const int rg = tid >> 4;
  const int cg = tid & 15;
  const QueryTileBlock<BQ, BK> blk(a);
  const std::int64_t bh = bh_row(blk.b, a.heads, blk.h);
  // D first, before the Q and dO loads (after them, ptxas spilled 8-16
  // bytes at hd 32 and 64); dK/dV runs after this kernel.
  dq_tile_delta<float, HD, kFlashThreads>(a, bh, blk.tok0 + blk.q0, blk.h, blk.q0,
                                          blk.q_end - blk.q0, tid);
  const float* gk =
      static_cast<const float*>(a.k) + blk.tok0 * a.ldk + static_cast<std::int64_t>(blk.kvh) * HD;
  const float* gv =
      static_cast<const float*>(a.v) + blk.tok0 * a.ldv + static_cast<std::int64_t>(blk.kvh) * HD;

  load_tile<float, BQ, HD, LDS>(s_q,
                                static_cast<const float*>(a.q) + (blk.tok0 + blk.q0) * a.ldq +
                                    static_cast<std::int64_t>(blk.h) * HD,
                                a.ldq, blk.q_end - blk.q0, a.vec);
  load_tile<float, BQ, HD, LDS>(s_do,
                                static_cast<const float*>(a.dout) +
                                    (blk.tok0 + blk.q0) * a.ld_dout +
                                    static_cast<std::int64_t>(blk.h) * HD,
                                a.ld_dout, blk.q_end - blk.q0, a.vec);

  float lse2[RM], dd[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int row = blk.q0 + rg * RM + i;
    lse2[i] = row < a.seq ? a.lse[bh * a.ld_lse + row] * kLog2e : 0.f;
    dd[i] = row < a.seq ? a.delta[bh * a.seq + row] : 0.f;
  }
  float dq[RM][OC];
  zero(dq);

  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int k0 = kt * BK;
    const int kv = min(BK, a.seq - k0);
    load_tile<float, BK, HD, LDS>(s_k, gk + k0 * a.ldk, a.ldk, kv, a.vec);
    load_tile<float, BK, HD, LDS>(s_v, gv + k0 * a.ldv, a.ldv, kv, a.vec);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float s[RM][CN], dp[RM][CN];
    zero(s);
    zero(dp);
    f32_abt<RM, CN, HD>(s, s_q, s_k, rg, cg);
    f32_abt<RM, CN, HD>(dp, s_do, s_v, rg, cg);

    const bool diag = k0 + BK - 1 > blk.q0;
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int row = blk.q0 + rg * RM + i;
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        float p = exp2f(fmaf(s[i][c], a.scale_log2, -lse2[i]));
        if (diag && k0 + cg + 16 * c > row) p = 0.f;
        s_ds[(rg * RM + i) * LDP + cg + 16 * c] = p * (dp[i][c] - dd[i]);
      }
    }
    __syncthreads();
    f32_pb<RM, HD, BK, LDP>(dq, s_ds, s_k, rg, cg);
    __syncthreads();  // K, V and dS are overwritten by the next tile
  }

  store_dq_f32<HD, RM, OC>(a, blk, dq, rg, cg);
}

}  // namespace

template <int HD>
void launch_forward_fp32(const FwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Cfg = F32Fwd<HD>;
  if (args.rope != nullptr) {
    launch<flash_fwd_f32_kernel<HD, true>>(dim3(tiles(d.seq, Cfg::BQ), d.heads, d.batch), Cfg::smem,
                                           args, stream);
  } else {
    launch<flash_fwd_f32_kernel<HD, false>>(dim3(tiles(d.seq, Cfg::BQ), d.heads, d.batch),
                                            Cfg::smem, args, stream);
  }
}

template <int HD>
void launch_backward_fp32(const BwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Kv = F32Dkdv<HD>;
  using Q = F32Dq<HD>;
  // dQ first: with dq_writes_delta its prologue writes the D that dK/dV reads.
  launch<flash_bwd_dq_f32_kernel<HD>>(dim3(tiles(d.seq, Q::BQ), d.heads, d.batch), Q::smem, args,
                                      stream);
  launch<flash_bwd_dkdv_f32_kernel<HD>>(dim3(tiles(d.seq, Kv::BK), d.kv_heads, d.batch), Kv::smem,
                                        args, stream);
}

template void launch_forward_fp32<32>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_fp32<64>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_fp32<128>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_fp32<32>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_fp32<64>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_fp32<128>(const BwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_fp32<96>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_backward_fp32<96>(const BwdArgs&, const FlashDims&, cudaStream_t);

}  // namespace tinyllama::cuda::flash
