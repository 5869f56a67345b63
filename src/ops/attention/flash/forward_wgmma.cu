// The Hopper forward (bf16 / fp16, sm_90a): Q K^T and P V on wgmma, the
// warpgroup MMA that reads its operands from shared memory (P from
// registers) instead of from ldmatrix fragments. A block is WGS warpgroups
// of 64 query rows each, sharing the K/V tiles of BK keys; the tiles of the
// next key block arrive by cp.async while the current one is computed.
// Same contract as forward_tc.cu: writes O and lse = log(sum exp) per row;
// rows must allow 16-byte accesses (the dispatcher sends others there).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device/cuda_check.h"
#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/forward_wgmma_steps.cuh"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/mma_tiles.cuh"
#include "ops/attention/flash/online_softmax.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"
#include "ops/attention/flash/rope_tiles.cuh"
#include "ops/attention/flash/tiles.cuh"

namespace tinyllama::cuda::flash {
namespace {

template <int HD, int BK, int WGS, bool PAIR>
struct WgmmaFwd {
  static constexpr int kWarpGroups = WGS;
  static constexpr int kThreads = 128 * kWarpGroups;
  // Query rows per block: PAIR gives every warpgroup the same 64 rows of
  // another head of one kv group (so the K/V tiles serve all of them).
  static constexpr int BQ = PAIR ? 64 : 64 * kWarpGroups;
  static constexpr int kStages = 2;              // K/V tiles in flight: the current and the next
  static constexpr int kQWgBytes = 64 * HD * 2;  // each warpgroup's Q rows: a tile of their own
  static constexpr int kQBytes = kQWgBytes * WGS;
  static constexpr int kKvBytes = BK * HD * 2;  // one K or one V tile
  // + one atom of slack: the tiles start 1024-byte aligned.
  static constexpr std::size_t smem =
      kSwizzleAtomBytes + kQBytes + static_cast<std::size_t>(2 * kStages) * kKvBytes;
};

// The steps below exist only where wgmma does (sm_90a); so does the
// kernel's body.
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// Prologue: the warpgroup's 64 Q rows (valid of them in the sequence) and
// the first K and V tiles, one cp.async group.
template <typename T, int HD, int BK, int NTHREADS>
__device__ __forceinline__ void load_first_tiles(unsigned char* s_qw, unsigned char* s_k,
                                                 unsigned char* s_v, const T* gq, const T* gk,
                                                 const T* gv, const FwdArgs& a, int valid, int wtid,
                                                 int tid) {
  load_tile_sw128<T, 64, HD, 128>(s_qw, gq, a.ldq, valid, wtid);
  load_tile_sw128<T, BK, HD, NTHREADS>(s_k, gk, a.ldk, min(BK, a.seq), tid);
  load_tile_sw128<T, BK, HD, NTHREADS>(s_v, gv, a.ldv, min(BK, a.seq), tid);
  cp_async_commit();
}

// Load: the next tile's K and V (keys [k0 + BK, k0 + 2 BK)) into the other
// stage, cp.async; the caller commits. The stages are the kernel's lambdas,
// called here: an address computed by the caller compiled otherwise.
template <typename T, int HD, int BK, int NTHREADS, typename KStage, typename VStage>
__device__ __forceinline__ void load_next_tiles(const KStage& s_k, const VStage& s_v, int stage,
                                                const T* gk, const T* gv, const FwdArgs& a, int k0,
                                                int tid) {
  const int k1 = k0 + BK;
  load_tile_sw128<T, BK, HD, NTHREADS>(s_k(stage ^ 1), gk + k1 * a.ldk, a.ldk, min(BK, a.seq - k1),
                                       tid);
  load_tile_sw128<T, BK, HD, NTHREADS>(s_v(stage ^ 1), gv + k1 * a.ldv, a.ldv, min(BK, a.seq - k1),
                                       tid);
}

// Waits for tile kt's K and V (and, at tile 0, the warpgroup's Q rows):
// this thread's copies, then with RoPE its own chunks rotated in place (no
// barrier before: each thread rotates what it copied), then every thread's.
template <typename T, int HD, int BK, int NTHREADS, bool ROPE, typename Block, typename KStage>
__device__ __forceinline__ void wait_tile_landed(unsigned char* s_qw, const KStage& s_k, int stage,
                                                 const FwdArgs& a, const Block& blk, int wq0,
                                                 int kt, int k0, int wtid, int tid) {
  cp_async_wait<1>();  // this thread's copies of tile kt (and Q) landed
  if constexpr (ROPE) {
    if (kt == 0) rope_tile_sw128<T, 64, HD, 128>(s_qw, blk.q_end - wq0, a.rope, wq0, wtid);
    rope_tile_sw128<T, BK, HD, NTHREADS>(s_k(stage), min(BK, a.seq - k0), a.rope, k0, tid);
  }
  fence_proxy_async();
  __syncthreads();  // everyone's landed
}

// Mainloop, first product: S = Q K^T of the warpgroup's 64 rows over one key
// tile, waited for (its own wgmma group).
template <typename T, int HD, int BK>
__device__ __forceinline__ void compute_scores(float (&s)[BK / 8][4], unsigned q_addr,
                                               unsigned k_addr) {
  wgmma_fence();
  issue_scores<T, HD, BK, 64>(s, q_addr, k_addr);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(s);
}

// Mainloop, second product: O += P V over the same tile, waited for.
template <typename T, int HD, int BK>
__device__ __forceinline__ void accumulate_pv(float (&o)[HD / 8][4], unsigned (&p)[BK / 16][4],
                                              unsigned v_addr) {
  wgmma_fence();
  issue_pv<T, HD, BK>(o, p, v_addr);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(o);
  fence_regs(p);
}
#endif

// ROPE: a.rope is set (rope_tiles.cuh); a template argument, so that the
// kernels without it compile as if it did not exist.
template <typename T, int HD, int BK, int WGS, bool PAIR, bool ROPE>
__global__ void __launch_bounds__(WgmmaFwd<HD, BK, WGS, PAIR>::kThreads)
    flash_fwd_wgmma_kernel(const FwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  using Cfg = WgmmaFwd<HD, BK, WGS, PAIR>;
  constexpr int BQ = Cfg::BQ;
  constexpr int kThreads = Cfg::kThreads;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_atom(smem_raw);
  unsigned char* s_q = smem;
  auto s_k = [&](int stage) { return smem + Cfg::kQBytes + stage * Cfg::kKvBytes; };
  auto s_v = [&](int stage) {
    return smem + Cfg::kQBytes + (Cfg::kStages + stage) * Cfg::kKvBytes;
  };

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const int wtid = tid & 127;
  const int warp = wtid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const QueryTileBlock<BQ, BK> blk(a);
  // This warpgroup's head and rows [wq0, wq0 + 64).
  const int h = PAIR ? blk.h * WGS + wg : blk.h;
  const int kvh = h / a.group;
  const int wq0 = PAIR ? blk.q0 : blk.q0 + wg * 64;
  unsigned char* s_qw = s_q + wg * Cfg::kQWgBytes;
  const T* gq =
      static_cast<const T*>(a.q) + (blk.tok0 + wq0) * a.ldq + static_cast<std::int64_t>(h) * HD;
  const T* gk = static_cast<const T*>(a.k) + blk.tok0 * a.ldk + static_cast<std::int64_t>(kvh) * HD;
  const T* gv = static_cast<const T*>(a.v) + blk.tok0 * a.ldv + static_cast<std::int64_t>(kvh) * HD;

  load_first_tiles<T, HD, BK, kThreads>(s_qw, s_k(0), s_v(0), gq, gk, gv, a, blk.q_end - wq0, wtid,
                                        tid);
  if constexpr (ROPE) {  // while the first tiles land
    rope_write_block<T, HD, kThreads>(a, blk.tok0, blk.q0, blk.q_end, PAIR ? blk.h * WGS : blk.h,
                                      PAIR ? WGS : 1, tid);
  }

  // The thread holds rows row0 and row1.
  const int row0 = wq0 + warp * 16 + g;
  const int row1 = row0 + 8;
  const unsigned q_addr = smem_u32(s_qw);

  float o[HD / 8][4];
  zero(o);
  SoftmaxRows st;

  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int k0 = kt * BK;
    const int stage = kt & 1;
    if (kt + 1 < blk.n_kt)
      load_next_tiles<T, HD, BK, kThreads>(s_k, s_v, stage, gk, gv, a, k0, tid);
    cp_async_commit();
    wait_tile_landed<T, HD, BK, kThreads, ROPE>(s_qw, s_k, stage, a, blk, wq0, kt, k0, wtid, tid);

    // A key tile wholly after this warpgroup's last row adds nothing to it.
    if (k0 <= wq0 + 63) {
      const unsigned k_addr = smem_u32(s_k(stage));
      const unsigned v_addr = smem_u32(s_v(stage));
      float s[BK / 8][4];
      compute_scores<T, HD, BK>(s, q_addr, k_addr);

      unsigned p[BK / 16][4];
      scale_rows<HD>(
          o, softmax_tile<T, BK>(s, p, st, a.scale_log2, k0 + BK - 1 > wq0, k0, row0, row1, t));

      accumulate_pv<T, HD, BK>(o, p, v_addr);
    }
    __syncthreads();  // every warpgroup is done with this stage before it is refilled
  }
  cp_async_wait<0>();

  // Each warpgroup stages through its own rows of s_q, which only it read.
  store_output_wgmma<T, HD>(a, blk, h, wq0, s_qw, 64, 1 + wg, o, st, warp, lane, wtid, t, row0,
                            row1);
#endif
}

template <typename T, int HD, int BK, int WGS, bool PAIR, bool ROPE>
void launch_wgmma_kernel(const FwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Cfg = WgmmaFwd<HD, BK, WGS, PAIR>;
  constexpr auto kernel = flash_fwd_wgmma_kernel<T, HD, BK, WGS, PAIR, ROPE>;
  allow_smem<kernel>(Cfg::smem);
  const unsigned heads = static_cast<unsigned>(PAIR ? d.heads / WGS : d.heads);
  launch_kernel(kernel, dim3(tiles(d.seq, Cfg::BQ), heads, d.batch), Cfg::kThreads, Cfg::smem,
                stream, args);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T, int HD, int BK, int WGS, bool PAIR>
void launch_forward_wgmma(const FwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  if (args.rope != nullptr) {
    launch_wgmma_kernel<T, HD, BK, WGS, PAIR, true>(args, d, stream);
  } else {
    launch_wgmma_kernel<T, HD, BK, WGS, PAIR, false>(args, d, stream);
  }
}

#define TINYLLAMA_FWD_WGMMA(T, HD)                                                           \
  template void launch_forward_wgmma<T, HD, 64, 1, false>(const FwdArgs&, const FlashDims&,  \
                                                          cudaStream_t);                     \
  template void launch_forward_wgmma<T, HD, 128, 1, false>(const FwdArgs&, const FlashDims&, \
                                                           cudaStream_t);                    \
  template void launch_forward_wgmma<T, HD, 64, 2, false>(const FwdArgs&, const FlashDims&,  \
                                                          cudaStream_t);                     \
  template void launch_forward_wgmma<T, HD, 128, 2, false>(const FwdArgs&, const FlashDims&, \
                                                           cudaStream_t);                    \
  template void launch_forward_wgmma<T, HD, 64, 2, true>(const FwdArgs&, const FlashDims&,   \
                                                         cudaStream_t);                      \
  template void launch_forward_wgmma<T, HD, 128, 2, true>(const FwdArgs&, const FlashDims&,  \
                                                          cudaStream_t);
TINYLLAMA_FWD_WGMMA(__nv_bfloat16, 64)
TINYLLAMA_FWD_WGMMA(__nv_bfloat16, 128)
TINYLLAMA_FWD_WGMMA(__half, 64)
TINYLLAMA_FWD_WGMMA(__half, 128)
#undef TINYLLAMA_FWD_WGMMA

}  // namespace tinyllama::cuda::flash
