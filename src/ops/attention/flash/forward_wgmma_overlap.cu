// The Hopper forward with its softmax overlapped (bf16 / fp16, sm_90a):
// forward_wgmma.cu's tiling, but each iteration issues S = Q K^T of key
// tile kt and O += P V of tile kt - 1 together, then computes the softmax
// of tile kt while the tensor cores still run P V (FlashAttention-3's
// intra-warpgroup pipelining). K and V tiles travel one tile apart: tile kt
// of K and tile kt - 1 of V are resident together, tile kt + 1 of K and kt
// of V in flight. Same contract and restrictions as forward_wgmma.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device/cuda_check.h"
#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/online_softmax.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"
#include "ops/attention/flash/rope_tiles.cuh"
#include "ops/attention/flash/tiles.cuh"

namespace tinyllama::cuda::flash {
namespace {

template <int HD, int BK, int WGS>
struct OverlapFwd {
  static constexpr int kThreads = 128 * WGS;
  static constexpr int BQ = 64 * WGS;
  static constexpr int kQBytes = BQ * HD * 2;
  static constexpr int kKvBytes = BK * HD * 2;  // one K or one V tile
  // Q, two K and two V stages, and one atom of slack for the alignment.
  static constexpr std::size_t smem = kSwizzleAtomBytes + kQBytes + 4 * kKvBytes;
};

// ROPE: a.rope is set (rope_tiles.cuh); a template argument, so that the
// kernels without it compile as if it did not exist.
template <typename T, int HD, int BK, int WGS, bool ROPE>
__global__ void __launch_bounds__(OverlapFwd<HD, BK, WGS>::kThreads)
    flash_fwd_wgmma_overlap_kernel(const FwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  using Cfg = OverlapFwd<HD, BK, WGS>;
  constexpr int BQ = Cfg::BQ;
  constexpr int kThreads = Cfg::kThreads;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_atom(smem_raw);
  unsigned char* s_q = smem;
  auto s_k = [&](int tile) { return smem + Cfg::kQBytes + (tile & 1) * Cfg::kKvBytes; };
  auto s_v = [&](int tile) { return smem + Cfg::kQBytes + (2 + (tile & 1)) * Cfg::kKvBytes; };

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const int wtid = tid & 127;
  const int warp = wtid >> 5;
  const int lane = tid & 31;
  const int t = lane & 3;
  const QueryTileBlock<BQ, BK> blk(a);
  const T* gq = static_cast<const T*>(a.q) + (blk.tok0 + blk.q0) * a.ldq +
                static_cast<std::int64_t>(blk.h) * HD;
  const T* gk =
      static_cast<const T*>(a.k) + blk.tok0 * a.ldk + static_cast<std::int64_t>(blk.kvh) * HD;
  const T* gv =
      static_cast<const T*>(a.v) + blk.tok0 * a.ldv + static_cast<std::int64_t>(blk.kvh) * HD;
  auto load_k = [&](int tile) {
    const int k0 = tile * BK;
    load_tile_sw128<T, BK, HD, kThreads>(s_k(tile), gk + k0 * a.ldk, a.ldk, min(BK, a.seq - k0),
                                         tid);
  };
  auto load_v = [&](int tile) {
    const int k0 = tile * BK;
    load_tile_sw128<T, BK, HD, kThreads>(s_v(tile), gv + k0 * a.ldv, a.ldv, min(BK, a.seq - k0),
                                         tid);
  };

  const int wq0 = blk.q0 + wg * 64;  // this warpgroup's rows: [wq0, wq0 + 64)
  const int row0 = wq0 + warp * 16 + (lane >> 2);
  const int row1 = row0 + 8;
  const unsigned q_addr = smem_u32(s_q) + wg * 64 * kSwizzleRowBytes;
  auto qk = [&](float(&s)[BK / 8][4], int tile) {
    const unsigned k_addr = smem_u32(s_k(tile));
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      const unsigned step = (kk & 3) * 32;
      wgmma_ss<T, BK, 0, 0>(
          s, sw128_desc(q_addr + (kk >> 2) * BQ * kSwizzleRowBytes + step, 16, kSwizzleAtomBytes),
          sw128_desc(k_addr + (kk >> 2) * BK * kSwizzleRowBytes + step, 16, kSwizzleAtomBytes),
          kk > 0 ? 1 : 0);
    }
  };
  auto pv = [&](float(&o)[HD / 8][4], const unsigned(&p)[BK / 16][4], int tile) {
    const unsigned v_addr = smem_u32(s_v(tile));
#pragma unroll
    for (int kb = 0; kb < BK / 16; ++kb) {
      wgmma_rs<T, HD, 1>(
          o, p[kb],
          sw128_desc(v_addr + kb * 16 * kSwizzleRowBytes, BK * kSwizzleRowBytes, kSwizzleAtomBytes),
          1);
    }
  };
  auto diag = [&](int tile) { return tile * BK + BK - 1 > wq0; };

  // Tile 0: S and its softmax alone (nothing to add to O yet).
  load_tile_sw128<T, BQ, HD, kThreads>(s_q, gq, a.ldq, blk.q_end - blk.q0, tid);
  load_k(0);
  cp_async_commit();
  if (blk.n_kt > 1) load_k(1);
  load_v(0);
  cp_async_commit();
  if constexpr (ROPE)
    rope_write_block<T, HD, kThreads>(a, blk.tok0, blk.q0, blk.q_end, blk.h, 1, tid);
  cp_async_wait<1>();
  if constexpr (ROPE) {  // each thread its own chunks of Q and K 0: no barrier before
    rope_tile_sw128<T, BQ, HD, kThreads>(s_q, blk.q_end - blk.q0, a.rope, blk.q0, tid);
    rope_tile_sw128<T, BK, HD, kThreads>(s_k(0), min(BK, a.seq), a.rope, 0, tid);
  }
  fence_proxy_async();
  __syncthreads();

  float o[HD / 8][4];
  zero(o);
  SoftmaxRows st;
  float s[BK / 8][4];
  unsigned p[BK / 16][4];
  wgmma_fence();
  qk(s, 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(s);
  softmax_tile<T, BK>(s, p, st, a.scale_log2, diag(0), 0, row0, row1, t);
  bool pending = true;  // p holds tile kt - 1's probabilities, not yet in O

  for (int kt = 1; kt < blk.n_kt; ++kt) {
    __syncthreads();  // every warp is done with the tiles the loads below replace
    if (kt + 1 < blk.n_kt) load_k(kt + 1);
    load_v(kt);
    cp_async_commit();
    cp_async_wait<1>();  // K of tile kt and V of tile kt - 1 landed
    if constexpr (ROPE) {
      rope_tile_sw128<T, BK, HD, kThreads>(s_k(kt), min(BK, a.seq - kt * BK), a.rope, kt * BK, tid);
    }
    fence_proxy_async();
    __syncthreads();

    // A key tile wholly after this warpgroup's last row adds nothing to it.
    const bool active = kt * BK <= wq0 + 63;
    if (active || pending) wgmma_fence();
    if (active) {
      qk(s, kt);
      wgmma_commit();
    }
    if (pending) {
      pv(o, p, kt - 1);
      wgmma_commit();
    }
    float2 alpha = make_float2(1.f, 1.f);
    unsigned pn[BK / 16][4];
    if (active) {
      if (pending) {
        wgmma_wait<1>();
      } else {
        wgmma_wait<0>();
      }
      fence_regs(s);
      alpha = softmax_tile<T, BK>(s, pn, st, a.scale_log2, diag(kt), kt * BK, row0, row1, t);
    }
    if (pending) {
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(p);
    }
    if (active) {
      scale_rows<HD>(o, alpha);
#pragma unroll
      for (int i = 0; i < BK / 16; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) p[i][j] = pn[i][j];
      }
    }
    pending = active;
  }

  cp_async_wait<0>();  // V of the last tile
  fence_proxy_async();
  __syncthreads();
  if (pending) {
    wgmma_fence();
    pv(o, p, blk.n_kt - 1);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(p);
  }

  const float l0 = quad_sum(st.l0);
  const float l1 = quad_sum(st.l1);
  // Each warpgroup stages through its own rows of s_q, which only it read.
  unsigned char* s_o = s_q + wg * 64 * kSwizzleRowBytes;
  stage_acc_sw128<T, HD>(s_o, BQ, o, 1.f / l0, 1.f / l1, warp, lane);
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
  T* go = static_cast<T*>(a.out) + (blk.tok0 + wq0) * a.ldo + static_cast<std::int64_t>(blk.h) * HD;
  store_rows_sw128<T, HD>(go, a.ldo, s_o, BQ, blk.q_end - wq0, wtid);
  if (t == 0) {
    float* lrow = a.lse + bh_row(blk.b, a.heads, blk.h) * a.ld_lse;
    if (row0 < a.seq) lrow[row0] = lse_from_exp2(st.m0, l0);
    if (row1 < a.seq) lrow[row1] = lse_from_exp2(st.m1, l1);
  }
#endif
}

template <typename T, int HD, int BK, int WGS, bool ROPE>
void launch_overlap_kernel(const FwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Cfg = OverlapFwd<HD, BK, WGS>;
  constexpr auto kernel = flash_fwd_wgmma_overlap_kernel<T, HD, BK, WGS, ROPE>;
  allow_smem<kernel>(Cfg::smem);
  launch_kernel(kernel, dim3(tiles(d.seq, Cfg::BQ), d.heads, d.batch), Cfg::kThreads, Cfg::smem,
                stream, args);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T, int HD, int BK, int WGS>
void launch_forward_wgmma_overlap(const FwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  if (args.rope != nullptr) {
    launch_overlap_kernel<T, HD, BK, WGS, true>(args, d, stream);
  } else {
    launch_overlap_kernel<T, HD, BK, WGS, false>(args, d, stream);
  }
}

#define TINYLLAMA_FWD_OVERLAP(T, HD)                                                          \
  template void launch_forward_wgmma_overlap<T, HD, 64, 1>(const FwdArgs&, const FlashDims&,  \
                                                           cudaStream_t);                     \
  template void launch_forward_wgmma_overlap<T, HD, 64, 2>(const FwdArgs&, const FlashDims&,  \
                                                           cudaStream_t);                     \
  template void launch_forward_wgmma_overlap<T, HD, 128, 2>(const FwdArgs&, const FlashDims&, \
                                                            cudaStream_t);
TINYLLAMA_FWD_OVERLAP(__nv_bfloat16, 64)
TINYLLAMA_FWD_OVERLAP(__nv_bfloat16, 128)
TINYLLAMA_FWD_OVERLAP(__half, 64)
TINYLLAMA_FWD_OVERLAP(__half, 128)
#undef TINYLLAMA_FWD_OVERLAP

}  // namespace tinyllama::cuda::flash
