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

#include "cuda/cuda_check.h"
#include "cuda/flash/launch.cuh"
#include "cuda/flash/mma_tiles.cuh"
#include "cuda/flash/params.h"
#include "cuda/flash/prologue.cuh"
#include "cuda/flash/rope_epilogue.cuh"
#include "cuda/flash/tiles.cuh"
#include "cuda/flash/tma.cuh"
#include "cuda/flash/tma_maps.h"
#include "cuda/flash/wgmma.cuh"
#include "cuda/flash/wgmma_tiles.cuh"

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
  pdl_wait_previous();  // first: PDL (cuda/cuda_launch.cuh)
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
    mbar_init(kv_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, 2);  // one arrival per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // the producer: one thread issues every copy
    regs_dec<40>();
    if (tid == 0) {
      const int k_row = static_cast<int>(blk.tok0) + blk.k0;
      mbar_expect_tx(kv_full, 2 * Cfg::kKvBytes);
      for (int cb = 0; cb < HD / 64; ++cb) {
        tma_load_2d(s_k + cb * BK * kSwizzleRowBytes, &tk, blk.kvh * HD + cb * 64, k_row, kv_full);
        tma_load_2d(s_v + cb * BK * kSwizzleRowBytes, &tv, blk.kvh * HD + cb * 64, k_row, kv_full);
      }
      for (int it = 0; it < blk.n_it; ++it) {
        const int stage = it % STAGES;
        if (it >= STAGES) mbar_wait(empty + stage, ((it / STAGES) - 1) & 1);
        const int h = blk.head_of(it, a.group);
        const int row = static_cast<int>(blk.tok0) + blk.q0_of(it);
        mbar_expect_tx(full + stage, 2 * Cfg::kQBytes);
        for (int cb = 0; cb < HD / 64; ++cb) {
          tma_load_2d(s_q(stage) + cb * BQ * kSwizzleRowBytes, &tq, h * HD + cb * 64, row,
                      full + stage);
          tma_load_2d(s_do(stage) + cb * BQ * kSwizzleRowBytes, &tdo, h * HD + cb * 64, row,
                      full + stage);
        }
      }
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
  const int key1 = key0 + 8;
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
    // Wait for the stage even where there is nothing to add (every key of
    // this consumer after every query of the tile, or past the sequence): a
    // consumer that released stages without waiting could run a lap ahead
    // and complete a phase of `empty` with its own two arrivals, and the
    // producer's parity wait would then miss the phase it waits for.
    mbar_wait(full + stage, (it / STAGES) & 1);
    if (ck0 < a.seq && q0 + BQ - 1 >= ck0) {
      const unsigned q_addr = smem_u32(s_q(stage));
      const unsigned do_addr = smem_u32(s_do(stage));
      float st[BQ / 8][4], dpt[BQ / 8][4];
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
      // lse and D of this thread's query columns, while the products run.
      const std::int64_t bh = bh_row(blk.b, a.heads, blk.head_of(it, a.group));
      float lse2[BQ / 8][2], dd[BQ / 8][2];
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
      wgmma_wait<0>();
      fence_regs(st);
      fence_regs(dpt);

      const bool need_mask = (ck0 + 63 > q0) || (q0 + BQ > a.seq);
      unsigned p[BQ / 16][4], ds[BQ / 16][4];
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
      // dV += P^T dO and dK += dS^T Q: dO and Q read transposed (their rows
      // are the reduction), 64-column blocks BQ rows apart.
      wgmma_fence();
#pragma unroll
      for (int kb = 0; kb < BQ / 16; ++kb) {
        wgmma_rs<T, HD, 1>(dv, p[kb],
                           sw128_desc(do_addr + kb * 16 * kSwizzleRowBytes, BQ * kSwizzleRowBytes,
                                      kSwizzleAtomBytes),
                           1);
      }
#pragma unroll
      for (int kb = 0; kb < BQ / 16; ++kb) {
        wgmma_rs<T, HD, 1>(dk, ds[kb],
                           sw128_desc(q_addr + kb * 16 * kSwizzleRowBytes, BQ * kSwizzleRowBytes,
                                      kSwizzleAtomBytes),
                           1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(dv);
      fence_regs(dk);
      fence_regs(p);
      fence_regs(ds);
    }
    // Every warp of this consumer is done with the stage: release it once.
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
    if (wtid == 0) mbar_arrive(empty + stage);
  }

  // Stage through this consumer's own rows of K and V (only it read them).
  unsigned char* s_dk = s_k + c * 64 * kSwizzleRowBytes;
  unsigned char* s_dv = s_v + c * 64 * kSwizzleRowBytes;
  rope_unrotate_acc<HD>(dk, a.rope, key0, a.seq, t);
  stage_acc_sw128<T, HD>(s_dk, BK, dk, a.scale, a.scale, warp, lane);
  stage_acc_sw128<T, HD>(s_dv, BK, dv, 1.f, 1.f, warp, lane);
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
  const std::int64_t row = blk.tok0 + ck0;
  const int valid = blk.k_valid - c * 64;
  store_rows_sw128<T, HD>(
      static_cast<T*>(a.dk) + row * a.ld_dk + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dk,
      s_dk, BK, valid, wtid);
  store_rows_sw128<T, HD>(
      static_cast<T*>(a.dv) + row * a.ld_dv + static_cast<std::int64_t>(blk.kvh) * HD, a.ld_dv,
      s_dv, BK, valid, wtid);
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
