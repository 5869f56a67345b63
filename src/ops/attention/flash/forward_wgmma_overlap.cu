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
#include "ops/attention/flash/forward_wgmma_steps.cuh"
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

// The steps below exist only where wgmma does (sm_90a); so does the
// kernel's body.
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// Prologue: Q and the first K and V tiles landed for every thread (rotated
// with RoPE, whose q, k and v copies are written meanwhile), K 1 in flight.
// The kernel's loaders and stage addresses are called here, not before:
// where the caller computes an address compiled otherwise.
template <typename T, int HD, int BK, int BQ, int NTHREADS, bool ROPE, typename Block,
          typename LoadK, typename LoadV, typename KStage>
__device__ __forceinline__ void load_first_tiles(unsigned char* s_q, const T* gq,
                                                 const LoadK& load_k, const LoadV& load_v,
                                                 const KStage& s_k, const FwdArgs& a,
                                                 const Block& blk, int tid) {
  load_tile_sw128<T, BQ, HD, NTHREADS>(s_q, gq, a.ldq, blk.q_end - blk.q0, tid);
  load_k(0);
  cp_async_commit();
  if (blk.n_kt > 1) load_k(1);
  load_v(0);
  cp_async_commit();
  if constexpr (ROPE)
    rope_write_block<T, HD, NTHREADS>(a, blk.tok0, blk.q0, blk.q_end, blk.h, 1, tid);
  cp_async_wait<1>();
  if constexpr (ROPE) {  // each thread its own chunks of Q and K 0: no barrier before
    rope_tile_sw128<T, BQ, HD, NTHREADS>(s_q, blk.q_end - blk.q0, a.rope, blk.q0, tid);
    rope_tile_sw128<T, BK, HD, NTHREADS>(s_k(0), min(BK, a.seq), a.rope, 0, tid);
  }
  fence_proxy_async();
  __syncthreads();
}

// Mainloop, loads of iteration kt: once every warp is done with the stages
// they replace, K of tile kt + 1 and V of tile kt in flight; K of tile kt
// (rotated with RoPE) and V of tile kt - 1 landed for every thread.
template <typename T, int HD, int BK, int NTHREADS, bool ROPE, typename Block, typename LoadK,
          typename LoadV, typename KStage>
__device__ __forceinline__ void load_next_tiles(const LoadK& load_k, const LoadV& load_v,
                                                const KStage& s_k, const FwdArgs& a,
                                                const Block& blk, int kt, int tid) {
  __syncthreads();  // every warp is done with the tiles the loads below replace
  if (kt + 1 < blk.n_kt) load_k(kt + 1);
  load_v(kt);
  cp_async_commit();
  cp_async_wait<1>();  // K of tile kt and V of tile kt - 1 landed
  if constexpr (ROPE) {
    rope_tile_sw128<T, BK, HD, NTHREADS>(s_k(kt), min(BK, a.seq - kt * BK), a.rope, kt * BK, tid);
  }
  fence_proxy_async();
  __syncthreads();
}

// Load: the K or V tile of keys [k0, k0 + BK) (cp.async; the caller
// commits), rows past the sequence end zeros.
template <typename T, int BK, int HD, int NTHREADS>
__device__ __forceinline__ void load_key_tile(unsigned char* dst, const T* g, std::int64_t ld,
                                              int k0, int seq, int tid) {
  load_tile_sw128<T, BK, HD, NTHREADS>(dst, g + k0 * ld, ld, min(BK, seq - k0), tid);
}

// Waits for the scores only: the P V group issued after them (pending) may
// still run while the softmax does.
template <typename S>
__device__ __forceinline__ void wait_scores(S& s, bool pending) {
  if (pending) {
    wgmma_wait<1>();
  } else {
    wgmma_wait<0>();
  }
  fence_regs(s);
}

// Every thread's copies landed and visible to wgmma.
__device__ __forceinline__ void wait_all_landed() {
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
}

// Tile 0's scores, alone and waited for (nothing to add to O yet).
template <typename QK, typename S>
__device__ __forceinline__ void first_scores(const QK& qk, S& s) {
  wgmma_fence();
  qk(s, 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(s);
}

// One product (qk or pv, with its arguments) issued as its own wgmma group.
template <typename Product, typename... Args>
__device__ __forceinline__ void commit_group(const Product& product, Args&&... args) {
  product(args...);
  wgmma_commit();
}

// Waits for P V: O and the probabilities it read are the registers' again.
template <typename O, typename P>
__device__ __forceinline__ void wait_pv(O& o, P& p) {
  wgmma_wait<0>();
  fence_regs(o);
  fence_regs(p);
}

// Epilogue's product: O += P V of the last tile, alone (its K's scores had
// nothing to overlap with).
template <typename PV, typename O, typename P>
__device__ __forceinline__ void last_pv(const PV& pv, O& o, P& p, int tile) {
  wgmma_fence();
  pv(o, p, tile);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(o);
  fence_regs(p);
}

// Softmax, its end: O so far rescaled to the new row max, and the new tile's
// probabilities become the ones the next P V reads.
template <int HD, int N>
__device__ __forceinline__ void rescale_and_keep(float (&o)[HD / 8][4], float2 alpha,
                                                 unsigned (&p)[N][4], const unsigned (&pn)[N][4]) {
  scale_rows<HD>(o, alpha);
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) p[i][j] = pn[i][j];
  }
}
#endif

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
    load_key_tile<T, BK, HD, kThreads>(s_k(tile), gk, a.ldk, tile * BK, a.seq, tid);
  };
  auto load_v = [&](int tile) {
    load_key_tile<T, BK, HD, kThreads>(s_v(tile), gv, a.ldv, tile * BK, a.seq, tid);
  };

  const int wq0 = blk.q0 + wg * 64;  // this warpgroup's rows: [wq0, wq0 + 64)
  const int row0 = wq0 + warp * 16 + (lane >> 2);
  const int row1 = row0 + 8;
  const unsigned q_addr = smem_u32(s_q) + wg * 64 * kSwizzleRowBytes;
  auto qk = [&](auto& s, int tile) { issue_scores<T, HD, BK, BQ>(s, q_addr, smem_u32(s_k(tile))); };
  auto pv = [&](auto& o, auto& p, int tile) { issue_pv<T, HD, BK>(o, p, smem_u32(s_v(tile))); };
  auto diag = [&](int tile) { return tile * BK + BK - 1 > wq0; };

  // Tile 0: S and its softmax alone (nothing to add to O yet).
  load_first_tiles<T, HD, BK, BQ, kThreads, ROPE>(s_q, gq, load_k, load_v, s_k, a, blk, tid);

  float o[HD / 8][4];
  zero(o);
  SoftmaxRows st;
  float s[BK / 8][4];
  unsigned p[BK / 16][4];
  first_scores(qk, s);
  softmax_tile<T, BK>(s, p, st, a.scale_log2, diag(0), 0, row0, row1, t);
  bool pending = true;  // p holds tile kt - 1's probabilities, not yet in O

  for (int kt = 1; kt < blk.n_kt; ++kt) {
    load_next_tiles<T, HD, BK, kThreads, ROPE>(load_k, load_v, s_k, a, blk, kt, tid);

    // A key tile wholly after this warpgroup's last row adds nothing to it.
    const bool active = kt * BK <= wq0 + 63;
    if (active || pending) wgmma_fence();
    if (active) commit_group(qk, s, kt);  // scores first: the first to wait for
    if (pending) commit_group(pv, o, p, kt - 1);
    float2 alpha = make_float2(1.f, 1.f);
    unsigned pn[BK / 16][4];
    if (active) {
      wait_scores(s, pending);
      alpha = softmax_tile<T, BK>(s, pn, st, a.scale_log2, diag(kt), kt * BK, row0, row1, t);
    }
    if (pending) wait_pv(o, p);
    if (active) rescale_and_keep<HD>(o, alpha, p, pn);
    pending = active;
  }

  wait_all_landed();  // V of the last tile
  if (pending) last_pv(pv, o, p, blk.n_kt - 1);

  // Each warpgroup stages through its own rows of s_q, which only it read.
  store_output_wgmma<T, HD>(a, blk, blk.h, wq0, s_q + wg * 64 * kSwizzleRowBytes, BQ, 1 + wg, o, st,
                            warp, lane, wtid, t, row0, row1);
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
