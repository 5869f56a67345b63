// The warp-specialised Hopper dK/dV kernel (bf16 / fp16, sm_90a), with
// backward_wgmma.cu's dQ kernel before it (its prologue can write D). A block owns 128 keys of one
// kv head: a producer warpgroup loads its K and V once and then streams the Q and dO tiles of every
// (query head of the group, query tile) pair by TMA into a ring of stages; two consumer warpgroups
// of 64 keys each run
//   S^T = K Q^T, dP^T = V dO^T, P^T = exp2(S^T - lse), dS^T = P^T (dP^T - D),
//   dV += P^T dO, dK += dS^T Q
// on wgmma as the tiles land, reading lse and D straight from global
// memory while their products run. Deterministic like backward_tc.cu;
// rows must allow 16-byte accesses.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device/arch/tma_maps.h"
#include "device/cuda_check.h"
#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/mma_tiles.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"
#include "ops/attention/flash/rope_epilogue.cuh"
#include "ops/attention/flash/tiles.cuh"
#include "ops/attention/flash/ws_key_block.cuh"

namespace tinyllama::cuda::flash {
namespace {

template <int HD, int STAGES>
struct WsDkdv {
  static constexpr int kThreads = 3 * 128;  // producer + two consumers
  static constexpr int BK = 128;            // keys per block, 64 per consumer
  static constexpr int BQ = 64;             // queries per tile
  static constexpr int kKvBytes = BK * HD * 2;
  static constexpr int kQBytes = BQ * HD * 2;
  static constexpr int kBarOffset = 2 * kKvBytes + 2 * STAGES * kQBytes;
  // Barriers: K and V landed, Q and dO landed [STAGES], stage free [STAGES].
  static constexpr std::size_t smem =
      kSwizzleAtomBytes + kBarOffset + (1 + 2 * STAGES) * sizeof(std::uint64_t);
};

template <typename T, int HD, int STAGES>
__global__ void __launch_bounds__(WsDkdv<HD, STAGES>::kThreads, 1)
    flash_bwd_dkdv_ws_kernel(const __grid_constant__ CUtensorMap tq,
                             const __grid_constant__ CUtensorMap tk,
                             const __grid_constant__ CUtensorMap tv,
                             const __grid_constant__ CUtensorMap tdo, const BwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  using Cfg = WsDkdv<HD, STAGES>;
  constexpr int BK = Cfg::BK, BQ = Cfg::BQ;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_atom(smem_raw);
  unsigned char* s_k = smem;
  unsigned char* s_v = smem + Cfg::kKvBytes;
  auto s_q = [&](int stage) { return smem + 2 * Cfg::kKvBytes + stage * Cfg::kQBytes; };
  auto s_do = [&](int stage) { return smem + 2 * Cfg::kKvBytes + (STAGES + stage) * Cfg::kQBytes; };
  auto* bars = reinterpret_cast<std::uint64_t*>(smem + Cfg::kBarOffset);
  std::uint64_t* kv_full = bars;
  std::uint64_t* full = bars + 1;
  std::uint64_t* empty = bars + 1 + STAGES;

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const KeyTileBlock<BK, BQ> blk(a);
  if (tid == 0) {
    ws_init_barriers<STAGES>(kv_full, full, empty);
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // the producer: one thread issues every copy
    regs_dec<40>();
    if (tid == 0) {
      ws_produce<HD, BK, BQ, STAGES>(&tq, &tk, &tv, &tdo, blk, a, s_k, s_v, s_q(0), s_do(0),
                                     kv_full, full, empty);
    }
    return;
  }

  regs_inc<232>();
  const int c = wg - 1;
  const int wtid = tid & 127;
  const int warp = wtid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int ck0 = blk.k0 + c * 64;  // this consumer's first key
  const int key0 = ck0 + warp * 16 + g;
  // This consumer's rows of the K and V tiles (each 64-column block holds BK rows).
  const unsigned k_addr = smem_u32(s_k) + c * 64 * kSwizzleRowBytes;
  const unsigned v_addr = smem_u32(s_v) + c * 64 * kSwizzleRowBytes;

  float dk[HD / 8][4], dv[HD / 8][4];
  zero(dk);
  zero(dv);
  mbar_wait(kv_full, 0);
  for (int it = 0; it < blk.n_it; ++it) {
    const int stage = it % STAGES;
    const int q0 = blk.q0_of(it);
    ws_wait_stage<STAGES>(full, it);  // even where there is nothing to add
    if (ck0 < a.seq && q0 + BQ - 1 >= ck0) {
      const unsigned q_addr = smem_u32(s_q(stage));
      const unsigned do_addr = smem_u32(s_do(stage));
      float st[BQ / 8][4], dpt[BQ / 8][4];
      ws_scores_t<T, HD, BK, BQ>(st, dpt, k_addr, v_addr, q_addr, do_addr);
      // lse and D of this thread's query columns, while the products run.
      float lse2[BQ / 8][2], dd[BQ / 8][2];
      ws_row_stats<BQ>(lse2, dd, a, bh_row(blk.b, a.heads, blk.head_of(it, a.group)), q0, t);
      ws_wait_scores<BQ>(st, dpt);

      const bool need_mask = (ck0 + 63 > q0) || (q0 + BQ > a.seq);
      unsigned p[BQ / 16][4], ds[BQ / 16][4];
      ws_probs_t<T, BQ>(st, dpt, lse2, dd, p, ds, a, q0, key0, need_mask, t);
      ws_dv_dk<T, HD, BQ>(dv, dk, p, ds, q_addr, do_addr);
      ws_wait_dv_dk<HD, BQ>(dv, dk, p, ds);
    }
    ws_release_stage(empty + stage, c, wtid);
  }

  // Through this consumer's own rows of K and V (only it read them).
  ws_store_dkdv<T, HD, BK, BQ>(dk, dv, a, blk, s_k, s_v, c, key0, warp, lane, wtid);
#endif
}

}  // namespace

template <typename T, int HD>
void launch_backward_ws(const BwdArgs& args, const Mat& q, const Mat& k, const Mat& v,
                        const Mat& dout, const FlashDims& d, cudaStream_t stream) {
  using Cfg = WsDkdv<HD, 2>;
  constexpr auto kernel = flash_bwd_dkdv_ws_kernel<T, HD, 2>;
  // dQ first: with dq_writes_delta its prologue writes the D that dK/dV reads.
  launch_backward_dq_wgmma<T, HD>(args, d, stream);
  allow_smem<kernel>(Cfg::smem);
  const CUtensorMap tq = tma_map_2d(q, Cfg::BQ);
  const CUtensorMap tk = tma_map_2d(k, Cfg::BK);
  const CUtensorMap tv = tma_map_2d(v, Cfg::BK);
  const CUtensorMap tdo = tma_map_2d(dout, Cfg::BQ);
  launch_kernel(kernel, dim3(tiles(d.seq, Cfg::BK), d.kv_heads, d.batch), Cfg::kThreads, Cfg::smem,
                stream, tq, tk, tv, tdo, args);
  CUDA_CHECK_LAUNCH();
}

template void launch_backward_ws<__nv_bfloat16, 64>(const BwdArgs&, const Mat&, const Mat&,
                                                    const Mat&, const Mat&, const FlashDims&,
                                                    cudaStream_t);
template void launch_backward_ws<__nv_bfloat16, 128>(const BwdArgs&, const Mat&, const Mat&,
                                                     const Mat&, const Mat&, const FlashDims&,
                                                     cudaStream_t);
template void launch_backward_ws<__half, 64>(const BwdArgs&, const Mat&, const Mat&, const Mat&,
                                             const Mat&, const FlashDims&, cudaStream_t);
template void launch_backward_ws<__half, 128>(const BwdArgs&, const Mat&, const Mat&, const Mat&,
                                              const Mat&, const FlashDims&, cudaStream_t);

}  // namespace tinyllama::cuda::flash
