// The tensor-core forward (bf16 / fp16): one block per (query tile, head,
// batch), Q K^T and P V on mma.sync with an online softmax in between, so
// the S x S scores never exist. Writes O and lse = log(sum exp) per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/mma_tiles.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"
#include "ops/attention/flash/rope_tiles.cuh"
#include "ops/attention/flash/tiles.cuh"

namespace tinyllama::cuda::flash {
namespace {

template <typename T, int HD>
struct MmaFwd {
  static constexpr int BQ = 64, BK = 64, LDS = MmaTile<HD>::LDS;
  static constexpr std::size_t smem = static_cast<std::size_t>(BQ + 2 * BK) * LDS * sizeof(T);
};

// This warp's 16 rows of Q, from shared memory to the A fragments of the
// Q K^T products.
template <typename T, int HD, int LDS>
__device__ __forceinline__ void load_q_fragments(unsigned (&qf)[HD / 16][4], const T* s_qw,
                                                 int lane) {
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    ldmatrix_x4(qf[kk], s_qw + a_row(lane) * LDS + kk * 16 + a_col(lane));
  }
}

// Mainloop: this warp's 16 rows of S = Q K^T over one key tile, Q from its
// fragments, K from shared memory.
template <typename T, int HD, int BK, int LDS>
__device__ __forceinline__ void score_tile(float (&s)[BK / 8][4], const unsigned (&qf)[HD / 16][4],
                                           const T* s_k, int lane) {
  zero(s);
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
    for (int nn = 0; nn < BK / 16; ++nn) {
      unsigned kb[4];
      ldmatrix_x4(kb, s_k + (nn * 16 + bnk_row(lane)) * LDS + kk * 16 + bnk_col(lane));
      mma16816<T>(s[2 * nn], qf[kk], kb[0], kb[1]);
      mma16816<T>(s[2 * nn + 1], qf[kk], kb[2], kb[3]);
    }
  }
}

// Softmax: the online softmax over one score tile (exp2 domain, the causal
// mask where the tile crosses the diagonal), leaving P = exp2(S - max) in s
// and the output so far rescaled to the new max; m0, m1 the rows' running
// max, l0, l1 this thread's partial sums. Its own summation order (one
// element at a time), not online_softmax.cuh's (pairs), keeps the bits.
template <int HD, int BK>
__device__ __forceinline__ void softmax_tile_mma(float (&s)[BK / 8][4], float (&o)[HD / 8][4],
                                                 float& m0, float& m1, float& l0, float& l1,
                                                 float scale_log2, bool diag, int k0, int row0,
                                                 int row1, int t) {
  float mx0 = m0, mx1 = m1;
#pragma unroll
  for (int nt = 0; nt < BK / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = k0 + nt * 8 + 2 * t + e;
      float x0 = s[nt][e] * scale_log2;
      float x1 = s[nt][2 + e] * scale_log2;
      if (diag) {
        if (col > row0) x0 = -INFINITY;
        if (col > row1) x1 = -INFINITY;
      }
      s[nt][e] = x0;
      s[nt][2 + e] = x1;
      mx0 = fmaxf(mx0, x0);
      mx1 = fmaxf(mx1, x1);
    }
  }
  mx0 = quad_max(mx0);
  mx1 = quad_max(mx1);
  const float alpha0 = exp2f(m0 - mx0);
  const float alpha1 = exp2f(m1 - mx1);
  m0 = mx0;
  m1 = mx1;
  float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
  for (int nt = 0; nt < BK / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      s[nt][e] = exp2f(s[nt][e] - mx0);
      s[nt][2 + e] = exp2f(s[nt][2 + e] - mx1);
      rs0 += s[nt][e];
      rs1 += s[nt][2 + e];
    }
  }
  l0 = l0 * alpha0 + rs0;  // per-thread partial sums; the quad is summed at the end
  l1 = l1 * alpha1 + rs1;
#pragma unroll
  for (int dt = 0; dt < HD / 8; ++dt) {
    o[dt][0] *= alpha0;
    o[dt][1] *= alpha0;
    o[dt][2] *= alpha1;
    o[dt][3] *= alpha1;
  }
}

// Epilogue: O = acc / l, staged through this warp's rows of s_q, to global
// memory, and lse = log(sum exp) per row.
template <typename T, int HD, int LDS, typename Block>
__device__ __forceinline__ void store_output(const FwdArgs& a, const Block& blk, T* s_q,
                                             const float (&o)[HD / 8][4], float m0, float m1,
                                             float l0, float l1, int warp, int lane, int t,
                                             int row0, int row1) {
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  // Each warp stages through its own rows of s_q, which only it has read.
  __syncwarp();
  T* s_o = s_q + warp * 16 * LDS;
  stage_acc<T, HD>(s_o, o, 1.f / l0, 1.f / l1, lane);
  __syncwarp();
  T* go = static_cast<T*>(a.out) + (blk.tok0 + blk.q0 + warp * 16) * a.ldo +
          static_cast<std::int64_t>(blk.h) * HD;
  store_warp_rows<T, HD, LDS>(go, a.ldo, s_o, blk.q_end - (blk.q0 + warp * 16), a.vec, lane);
  if (t == 0) {
    float* lrow = a.lse + bh_row(blk.b, a.heads, blk.h) * a.ld_lse;
    if (row0 < a.seq) lrow[row0] = lse_from_exp2(m0, l0);
    if (row1 < a.seq) lrow[row1] = lse_from_exp2(m1, l1);
  }
}

// Grid (query tiles, H, B), the longest (last) query tiles first. K and V of
// a tile are loaded in two cp.async groups so that V arrives while Q K^T and
// the softmax run, and the next K while P V runs.
// ROPE: a.rope is set (rope_tiles.cuh); a template argument, so that the
// kernels without it compile as if it did not exist.
template <typename T, int HD, bool ROPE>
__global__ void __maxnreg__(flash_reg_budget(HD, 255, 128, 128))
    flash_fwd_mma_kernel(const FwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  using Cfg = MmaFwd<T, HD>;
  constexpr int BQ = Cfg::BQ, BK = Cfg::BK, LDS = Cfg::LDS;
  extern __shared__ uint4 smem_raw[];
  T* s_q = reinterpret_cast<T*>(smem_raw);
  T* s_k = s_q + BQ * LDS;
  T* s_v = s_k + BK * LDS;

  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const QueryTileBlock<BQ, BK> blk(a);
  const T* gq = static_cast<const T*>(a.q) + (blk.tok0 + blk.q0) * a.ldq +
                static_cast<std::int64_t>(blk.h) * HD;
  const T* gk =
      static_cast<const T*>(a.k) + blk.tok0 * a.ldk + static_cast<std::int64_t>(blk.kvh) * HD;
  const T* gv =
      static_cast<const T*>(a.v) + blk.tok0 * a.ldv + static_cast<std::int64_t>(blk.kvh) * HD;

  load_tile<T, BQ, HD, LDS>(s_q, gq, a.ldq, blk.q_end - blk.q0, a.vec);
  load_tile<T, BK, HD, LDS>(s_k, gk, a.ldk, min(BK, a.seq), a.vec);
  cp_async_commit();
  [[maybe_unused]] const int tid = static_cast<int>(threadIdx.x);
  if constexpr (ROPE) {
    rope_write_block<T, HD, kFlashThreads>(a, blk.tok0, blk.q0, blk.q_end, blk.h, 1, tid);
  }
  cp_async_wait<0>();
  __syncthreads();
  if constexpr (ROPE) {
    rope_tile_padded<T, BQ, HD, LDS, kFlashThreads>(s_q, blk.q_end - blk.q0, a.rope, blk.q0, tid);
    rope_tile_padded<T, BK, HD, LDS, kFlashThreads>(s_k, min(BK, a.seq), a.rope, 0, tid);
    __syncthreads();
  }

  // Q stays in registers for the whole key loop.
  unsigned qf[HD / 16][4];
  load_q_fragments<T, HD, LDS>(qf, s_q + warp * 16 * LDS, lane);

  float o[HD / 8][4];
  zero(o);
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  const int row0 = blk.q0 + warp * 16 + g;
  const int row1 = row0 + 8;

  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int k0 = kt * BK;
    if (kt > 0) {
      cp_async_wait<0>();
      __syncthreads();  // K[kt] landed; every warp is done with V[kt-1]
      if constexpr (ROPE) {
        rope_tile_padded<T, BK, HD, LDS, kFlashThreads>(s_k, min(BK, a.seq - k0), a.rope, k0, tid);
        __syncthreads();
      }
    }
    load_tile<T, BK, HD, LDS>(s_v, gv + k0 * a.ldv, a.ldv, min(BK, a.seq - k0), a.vec);
    cp_async_commit();

    float s[BK / 8][4];
    score_tile<T, HD, BK, LDS>(s, qf, s_k, lane);

    // Every row has key 0 unmasked in the first tile, so the running max is
    // finite from then on.
    const bool diag = k0 + BK - 1 > blk.q0;
    softmax_tile_mma<HD, BK>(s, o, m0, m1, l0, l1, a.scale_log2, diag, k0, row0, row1, t);

    cp_async_wait<0>();
    __syncthreads();  // V[kt] landed; every warp is done with K[kt]
    if (kt + 1 < blk.n_kt) {
      load_tile<T, BK, HD, LDS>(s_k, gk + (k0 + BK) * a.ldk, a.ldk, min(BK, a.seq - k0 - BK),
                                a.vec);
      cp_async_commit();
    }
    mma_pb<T, HD, BK>(o, s, s_v, lane);
  }

  store_output<T, HD, LDS>(a, blk, s_q, o, m0, m1, l0, l1, warp, lane, t, row0, row1);
}

}  // namespace

template <typename T, int HD>
void launch_forward_tc(const FwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Cfg = MmaFwd<T, HD>;
  if (args.rope != nullptr) {
    launch<flash_fwd_mma_kernel<T, HD, true>>(dim3(tiles(d.seq, Cfg::BQ), d.heads, d.batch),
                                              Cfg::smem, args, stream);
    return;
  }
  launch<flash_fwd_mma_kernel<T, HD, false>>(dim3(tiles(d.seq, Cfg::BQ), d.heads, d.batch),
                                             Cfg::smem, args, stream);
}

template void launch_forward_tc<__nv_bfloat16, 32>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_tc<__nv_bfloat16, 64>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_tc<__nv_bfloat16, 128>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_tc<__half, 32>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_tc<__half, 64>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_tc<__half, 128>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_tc<__nv_bfloat16, 96>(const FwdArgs&, const FlashDims&, cudaStream_t);
template void launch_forward_tc<__half, 96>(const FwdArgs&, const FlashDims&, cudaStream_t);

}  // namespace tinyllama::cuda::flash
