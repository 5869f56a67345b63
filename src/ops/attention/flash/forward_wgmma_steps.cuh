#pragma once
// The steps the Hopper forwards share (forward_wgmma.cu, its overlapped
// form forward_wgmma_overlap.cu and the warp-specialised forward_ws.cu), as
// FlashAttention-3's hopper/ folder splits its mainloop and epilogue: a
// warpgroup owns 64 query rows and, per key tile,
//   S = Q K^T        (issue_scores, wgmma from shared memory)
//   P = softmax(S)   (softmax_tile, online_softmax.cuh)
//   O += P V         (issue_pv, P from registers)
// and at the end writes O / l and lse (store_output_wgmma). The issue_*
// steps only issue the wgmmas: the kernels differ in how they fence, commit
// and wait around them (one group a tile, two tiles' products overlapped,
// ping-pong turns between consumers).
#include <cstdint>

#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/mma_tiles.cuh"
#include "ops/attention/flash/online_softmax.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"

namespace tinyllama::cuda::flash {

#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// S = Q K^T of a warpgroup's 64 rows over one key tile of BK rows. q_addr:
// the warpgroup's first row in a swizzled Q tile of QROWS rows; k_addr: the
// K tile.
template <typename T, int HD, int BK, int QROWS>
__device__ __forceinline__ void issue_scores(float (&s)[BK / 8][4], unsigned q_addr,
                                             unsigned k_addr) {
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    // Step kk of the head dim: 64-column block kk / 4 (a tile of R rows
    // has its blocks R * 128 bytes apart), 32 bytes per step within it.
    const unsigned step = (kk & 3) * 32;
    const unsigned q_at = q_addr + (kk >> 2) * QROWS * kSwizzleRowBytes + step;
    const unsigned k_at = k_addr + (kk >> 2) * BK * kSwizzleRowBytes + step;
    wgmma_ss<T, BK, 0, 0>(s, sw128_desc(q_at, 16, kSwizzleAtomBytes),
                          sw128_desc(k_at, 16, kSwizzleAtomBytes), kk > 0 ? 1 : 0);
  }
}

// O += P V: V's tile is [keys][HD], head-dim contiguous, so B is MN-major:
// 8-key groups 1024 bytes apart, 64-column blocks BK rows.
template <typename T, int HD, int BK>
__device__ __forceinline__ void issue_pv(float (&o)[HD / 8][4], const unsigned (&p)[BK / 16][4],
                                         unsigned v_addr) {
#pragma unroll
  for (int kb = 0; kb < BK / 16; ++kb) {
    wgmma_rs<T, HD, 1>(
        o, p[kb],
        sw128_desc(v_addr + kb * 16 * kSwizzleRowBytes, BK * kSwizzleRowBytes, kSwizzleAtomBytes),
        1);
  }
}

// Epilogue: O = acc / l of a warpgroup's 64 rows [wq0, wq0 + 64) of head h,
// staged through s_o (its own rows of a swizzled tile of tile_rows rows,
// which only it read; `barrier` is its named barrier) to global memory, and
// lse = log(sum exp) per row.
template <typename T, int HD, typename Block>
__device__ __forceinline__ void store_output_wgmma(const FwdArgs& a, const Block& blk, int h,
                                                   int wq0, unsigned char* s_o, int tile_rows,
                                                   int barrier, const float (&o)[HD / 8][4],
                                                   const SoftmaxRows& st, int warp, int lane,
                                                   int wtid, int t, int row0, int row1) {
  const float l0 = quad_sum(st.l0);
  const float l1 = quad_sum(st.l1);
  stage_acc_sw128<T, HD>(s_o, tile_rows, o, 1.f / l0, 1.f / l1, warp, lane);
  asm volatile("bar.sync %0, 128;\n" ::"r"(barrier) : "memory");
  T* go = static_cast<T*>(a.out) + (blk.tok0 + wq0) * a.ldo + static_cast<std::int64_t>(h) * HD;
  store_rows_sw128<T, HD>(go, a.ldo, s_o, tile_rows, blk.q_end - wq0, wtid);
  if (t == 0) {
    float* lrow = a.lse + bh_row(blk.b, a.heads, h) * a.ld_lse;
    if (row0 < a.seq) lrow[row0] = lse_from_exp2(st.m0, l0);
    if (row1 < a.seq) lrow[row1] = lse_from_exp2(st.m1, l1);
  }
}
#endif

}  // namespace tinyllama::cuda::flash
