// The fused Hopper backward (bf16 / fp16, sm_90a): one kernel computes dK,
// dV and dQ, five products per (key tile, query tile) pair instead of the
// seven of the dQ + dK/dV pair (backward_ws.cu), where the dQ kernel
// recomputes S and dP. The block is backward_ws.cu's: 128 keys of one kv
// head, a TMA producer warpgroup streaming the Q and dO tiles of every
// (query head of the group, query tile) pair, two wgmma consumers of 64
// keys each running
//   S^T = K Q^T, dP^T = V dO^T, P^T = exp2(S^T - lse), dS^T = P^T (dP^T - D),
//   dV += P^T dO, dK += dS^T Q.
// Each consumer also writes its dS^T rows into a shared tile (128 keys x 64
// queries), and once both halves are there the block's dQ share over all
// 128 keys is computed -- at hd 64 by one consumer, the two taking turns;
// at hd 128 by both, 64 columns each --
//   dQ_n = dS K   (dS read transposed from that tile, K from the K tile),
// and staged in shared memory. One thread of the producer warpgroup adds
// the staged shares into the tile's fp32 accumulator in the fixed order of
// dq_ordered.cuh, and a conversion kernel after it writes dQ. D =
// rowsum(dO * O) comes from the delta kernel before it (which also zeroes
// the order counters): three launches. Deterministic; rows must allow
// 16-byte accesses.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device/arch/tma_maps.h"
#include "device/cuda_check.h"
#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/dq_ordered.cuh"
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
struct FusedBwd {
  static constexpr int kThreads = 3 * 128;  // producer + two consumers
  static constexpr int BK = 128;            // keys per block, 64 per consumer
  static constexpr int BQ = 64;             // queries per tile
  static constexpr int kKvBytes = BK * HD * 2;
  static constexpr int kQBytes = BQ * HD * 2;
  static constexpr int kDsBytes = BK * BQ * 2;  // dS^T: 128 key rows of 64 queries
  static constexpr int kDqBytes = BQ * HD * 4;  // a staged fp32 dQ share
  static constexpr int kDsOffset = 2 * kKvBytes + 2 * STAGES * kQBytes;
  static constexpr int kDqOffset = kDsOffset + 2 * kDsBytes;
  static constexpr int kBarOffset = kDqOffset + 2 * kDqBytes;
  // Barriers: K and V landed, Q and dO landed [STAGES], stage free [STAGES],
  // dQ share staged [2], dQ stage free [2].
  static constexpr int kBars = 1 + 2 * STAGES + 4;
  static constexpr std::size_t smem =
      kSwizzleAtomBytes + kBarOffset + kBars * sizeof(std::uint64_t);
};

// Named barriers: 1 + c for consumer c alone, kPairBarrier for both.
constexpr int kPairBarrier = 3;

// This consumer's dS^T (64 keys from row `row0` of the shared tile, as A
// fragments: ds[kb] holds query columns 16 kb .. 16 kb + 15) into the
// 128-row swizzled tile: rows row0 + 16w + g and + 8, columns 8 nt + 2t.
__device__ __forceinline__ void store_ds_rows(unsigned char* tile, int row0,
                                              const unsigned (&ds)[4][4], int warp, int lane) {
  const int r0 = row0 + warp * 16 + (lane >> 2);
  const int t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    *reinterpret_cast<unsigned*>(tile + sw128_offset(128, r0, nt) + 4 * t) =
        ds[nt >> 1][(nt & 1) * 2];
    *reinterpret_cast<unsigned*>(tile + sw128_offset(128, r0 + 8, nt) + 4 * t) =
        ds[nt >> 1][(nt & 1) * 2 + 1];
  }
}

#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// The producer warpgroup's writer thread (dq_ordered.cuh): each iteration's
// staged share, once a consumer has staged it (dq_full), added into the
// tile's accumulator by one bulk copy in the tile's turn (a plain copy for
// the first), the stage freed once read (dq_empty), and the tile counted on
// once the copy has landed, one tile later, so the copies overlap the
// waits. kt: the block's key tile (block 0 adds last: nobody waits for its
// count).
template <int HD, typename ShareOf, typename DqStage>
__device__ __forceinline__ void write_dq_shares(const ShareOf& share_of, const DqStage& s_dq,
                                                std::uint64_t* dq_full, std::uint64_t* dq_empty,
                                                int n_it, int kt) {
  int pending = -1;  // the iteration whose tile is not counted on yet
  for (int it = 0; it < n_it; ++it) {
    const int b = it & 1;
    mbar_wait(dq_full + b, (it >> 1) & 1);
    const DqShare sh = share_of(it);
    const unsigned bytes = static_cast<unsigned>(sh.rows * HD * 4);
    if (sh.order > 0) {
      while (ld_acquire_gpu(sh.counter) < sh.order) {
      }
      fence_proxy_async_global();
      bulk_add(sh.acc, s_dq(b), bytes);
    } else {
      bulk_store(sh.acc, s_dq(b), bytes);
    }
    bulk_commit();
    bulk_wait_read<0>();
    mbar_arrive(dq_empty + b);
    if (pending >= 0) {
      bulk_wait<1>();  // the previous tile's copy has landed
      fence_proxy_async_global();
      red_release_gpu_add(share_of(pending).counter, 1);
    }
    // Block 0 adds last: nobody waits for its count.
    if (kt > 0) pending = it;
  }
  bulk_wait<0>();
  if (pending >= 0) {
    fence_proxy_async_global();
    red_release_gpu_add(share_of(pending).counter, 1);
  }
}

// Where iteration it's dQ share goes (dq_ordered.cuh); n_qt: query tiles
// in the sequence, kt: the block's key tile.
template <int HD, int BK, int BQ>
__device__ __forceinline__ DqShare dq_share_of(const BwdArgs& a, const KeyTileBlock<BK, BQ>& blk,
                                               int n_qt, int kt, int it) {
  const int q0 = blk.q0_of(it);
  const int h = blk.head_of(it, a.group);
  const std::int64_t bh = bh_row(blk.b, a.heads, h);
  const int q_end = min(q0 + BQ, a.seq);
  DqShare sh;
  sh.order = (q_end - 1) / BK - kt;
  sh.counter = a.dq_counters + bh * n_qt + q0 / BQ;
  sh.acc = a.dq_acc + (bh * a.seq + q0) * HD;
  sh.rows = q_end - q0;
  return sh;
}

// The producer warpgroup: it gives registers back (the consumers hold the
// accumulators); one thread issues every copy (ws_produce), another adds
// the staged dQ shares (write_dq_shares).
template <int HD, int BK, int BQ, int STAGES, typename ShareOf, typename DqStage>
__device__ __forceinline__ void producer(
    const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv, const CUtensorMap* tdo,
    const KeyTileBlock<BK, BQ>& blk, const BwdArgs& a, unsigned char* s_k, unsigned char* s_v,
    unsigned char* s_q, unsigned char* s_do, std::uint64_t* kv_full, std::uint64_t* full,
    std::uint64_t* empty, const ShareOf& share_of, const DqStage& s_dq, std::uint64_t* dq_full,
    std::uint64_t* dq_empty, int kt, int tid) {
  regs_dec<56>();
  if (tid == 32) {
    write_dq_shares<HD>(share_of, s_dq, dq_full, dq_empty, blk.n_it, kt);
    return;
  }
  if (tid == 0) {
    ws_produce<HD, BK, BQ, STAGES>(tq, tk, tv, tdo, blk, a, s_k, s_v, s_q, s_do, kv_full, full,
                                   empty);
  }
}

// dQ share = dS K over the block's BK keys, N of its columns: dS^T read
// transposed from its shared tile (ds_addr), K from the 64-column block of
// the K tile holding the first column (kcol_addr); issued, not committed.
template <typename T, int N, int BK>
__device__ __forceinline__ void issue_dq_share(float (&dq)[N / 8][4], unsigned ds_addr,
                                               unsigned kcol_addr) {
#pragma unroll
  for (int kb = 0; kb < BK / 16; ++kb) {
    wgmma_ss<T, N, 1, 1>(
        dq,
        sw128_desc(ds_addr + kb * 16 * kSwizzleRowBytes, BK * kSwizzleRowBytes, kSwizzleAtomBytes),
        sw128_desc(kcol_addr + kb * 16 * kSwizzleRowBytes, BK * kSwizzleRowBytes,
                   kSwizzleAtomBytes),
        kb > 0 ? 1 : 0);
  }
}

// A consumer's dQ share of iteration it (dS K over the block's BK keys;
// rows of keys that do not see the tile are zero), N columns from col0
// (SPLIT_N: consumer c's half, else all), computed and staged in buffer
// it & 1 for the writer thread (dq_full), once that thread has read the
// share staged there two iterations ago (dq_empty).
template <typename T, int HD, int N, int BK, bool SPLIT_N, typename DqStage>
__device__ __forceinline__ void stage_dq_share_of_tile(unsigned char* ds_tile, unsigned char* s_k,
                                                       const DqStage& s_dq, std::uint64_t* dq_full,
                                                       std::uint64_t* dq_empty, int it, int c,
                                                       int warp, int lane, int wtid) {
  const unsigned ds_addr = smem_u32(ds_tile);
  const int col0 = SPLIT_N ? c * 64 : 0;
  // K's 64-column block holding column col0.
  const unsigned kcol_addr = smem_u32(s_k) + (col0 / 64) * BK * kSwizzleRowBytes;
  float dq[N / 8][4];
  wgmma_fence();
  issue_dq_share<T, N, BK>(dq, ds_addr, kcol_addr);
  wgmma_commit();
  // The writer thread is done with this buffer's share of two iterations ago.
  const int b = it & 1;
  if (it >= 2) mbar_wait(dq_empty + b, ((it >> 1) - 1) & 1);
  wgmma_wait<0>();
  fence_regs(dq);
  stage_dq_share<HD, N>(s_dq(b), dq, col0, warp, lane);
  fence_proxy_async();  // the bulk copy reads the stage through the async proxy
  named_barrier(1 + c, 128);
  if (wtid == 0) mbar_arrive(dq_full + b);
}

// A consumer's dQ share, dS K over the block's BK keys (rows of keys that
// do not see the tile are zero), N columns from col0 (SPLIT_N: consumer c's
// half, else all): issued and committed, the caller waits.
template <typename T, int N, int BK, bool SPLIT_N>
__device__ __forceinline__ void start_dq_share(float (&dq)[N / 8][4], unsigned char* ds_tile,
                                               unsigned char* s_k, int c) {
  const unsigned ds_addr = smem_u32(ds_tile);
  const int col0 = SPLIT_N ? c * 64 : 0;
  // K's 64-column block holding column col0.
  const unsigned kcol_addr = smem_u32(s_k) + (col0 / 64) * BK * kSwizzleRowBytes;
  wgmma_fence();
  issue_dq_share<T, N, BK>(dq, ds_addr, kcol_addr);
  wgmma_commit();
}

// The share staged for the writer thread (its bulk copy reads it through
// the async proxy), and handed over once all of the consumer's warps have
// staged theirs (dq_full: one arrival per consumer that staged a part).
template <int HD, int N, bool SPLIT_N>
__device__ __forceinline__ void hand_over_dq_share(float* stage, const float (&dq)[N / 8][4],
                                                   std::uint64_t* dq_full, int c, int warp,
                                                   int lane, int wtid) {
  stage_dq_share<HD, N>(stage, dq, SPLIT_N ? c * 64 : 0, warp, lane);
  fence_proxy_async();
  named_barrier(1 + c, 128);
  if (wtid == 0) mbar_arrive(dq_full);
}

// Barrier set-up (one thread): ws_key_block.cuh's, and per dQ stage buffer
// staged (by the consumers that staged a part: both with SPLIT_N) and free
// again (the writer thread, once read).
template <int STAGES, bool SPLIT_N>
__device__ __forceinline__ void init_barriers(std::uint64_t* kv_full, std::uint64_t* full,
                                              std::uint64_t* empty, std::uint64_t* dq_full,
                                              std::uint64_t* dq_empty) {
  ws_init_barriers<STAGES>(kv_full, full, empty);
  for (int b = 0; b < 2; ++b) {
    mbar_init(dq_full + b, SPLIT_N ? 2 : 1);
    mbar_init(dq_empty + b, 1);
  }
  mbar_init_fence();
}
#endif

// The rows of dS^T of a consumer none of whose keys sees the tile: zero, so
// that the dQ product can run over all 128 keys unconditionally.
template <int N>
__device__ __forceinline__ void zero_fragments(unsigned (&ds)[N][4]) {
#pragma unroll
  for (int kb = 0; kb < N; ++kb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) ds[kb][e] = 0u;
  }
}

#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// A consumer warpgroup (wg 1 or 2): per iteration, dK and dV of its 64
// keys (ws_key_block.cuh's steps), its dS^T rows into the shared tile, and
// dQ shares from it; at the end its rows of dK and dV. `a` by value, as the
// kernel holds it: taken by reference, its loads compiled otherwise.
template <typename T, int HD, int BK, int BQ, int STAGES, typename QStage, typename DoStage,
          typename DsTile, typename DqStage>
__device__ __forceinline__ void consumer(const BwdArgs a, const KeyTileBlock<BK, BQ>& blk,
                                         unsigned char* s_k, unsigned char* s_v, const QStage& s_q,
                                         const DoStage& s_do, const DsTile& s_ds,
                                         const DqStage& s_dq, std::uint64_t* kv_full,
                                         std::uint64_t* full, std::uint64_t* empty,
                                         std::uint64_t* dq_full, std::uint64_t* dq_empty, int tid,
                                         int wg) {
  // At hd 128 both consumers take 64 of dQ's columns each (fewer live
  // registers beside dK and dV); at hd 64 they take turns with all of them.
  constexpr bool kSplitN = HD == 128;
  constexpr int kDqN = kSplitN ? 64 : HD;  // dQ columns per consumer
  regs_inc<224>();
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
    const std::int64_t bh = bh_row(blk.b, a.heads, blk.head_of(it, a.group));
    unsigned char* ds_tile = s_ds(it & 1);
    ws_wait_stage<STAGES>(full, it);  // even where there is nothing to add
    const bool active = ck0 < a.seq && q0 + BQ - 1 >= ck0;
    const unsigned q_addr = smem_u32(s_q(stage));
    const unsigned do_addr = smem_u32(s_do(stage));
    unsigned p[BQ / 16][4], ds[BQ / 16][4];
    if (active) {
      float st[BQ / 8][4], dpt[BQ / 8][4];
      ws_scores_t<T, HD, BK, BQ>(st, dpt, k_addr, v_addr, q_addr, do_addr);
      // lse and D of this thread's query columns, while the products run.
      float lse2[BQ / 8][2], dd[BQ / 8][2];
      ws_row_stats<BQ>(lse2, dd, a, bh, q0, t);
      ws_wait_scores<BQ>(st, dpt);
      const bool need_mask = (ck0 + 63 > q0) || (q0 + BQ > a.seq);
      ws_probs_t<T, BQ>(st, dpt, lse2, dd, p, ds, a, q0, key0, need_mask, t);
    } else {
      // No key of this consumer sees the tile: its rows of dS^T are zero,
      // so the dQ product can run over all 128 keys unconditionally.
      zero_fragments(ds);
    }
    // dS^T for the dQ product; the wgmma reads it through the async proxy.
    store_ds_rows(ds_tile, c * 64, ds, warp, lane);
    fence_proxy_async();
    if (active) ws_dv_dk<T, HD, BQ>(dv, dk, p, ds, q_addr, do_addr);
    // Both consumers' dS^T rows are in the tile.
    named_barrier(kPairBarrier, 256);
    if (active) ws_wait_dv_dk<HD, BQ>(dv, dk, p, ds);
    ws_release_stage(empty + stage, c, wtid);

    if (kSplitN || c == (it & 1)) {
      float dq[kDqN / 8][4];
      start_dq_share<T, kDqN, BK, kSplitN>(dq, ds_tile, s_k, c);
      // The writer thread is done with this buffer's share of two iterations ago.
      const int b = it & 1;
      if (it >= 2) mbar_wait(dq_empty + b, ((it >> 1) - 1) & 1);
      wgmma_wait<0>();
      fence_regs(dq);
      hand_over_dq_share<HD, kDqN, kSplitN>(s_dq(b), dq, dq_full + b, c, warp, lane, wtid);
    }
  }

  // Both consumers' dQ products read every row of K: done before the
  // staging below overwrites this consumer's rows.
  named_barrier(kPairBarrier, 256);
  ws_store_dkdv<T, HD, BK, BQ>(dk, dv, a, blk, s_k, s_v, c, key0, warp, lane, wtid);
}
#endif

template <typename T, int HD, int STAGES>
__global__ void __launch_bounds__(FusedBwd<HD, STAGES>::kThreads, 1)
    flash_bwd_fused_kernel(const __grid_constant__ CUtensorMap tq,
                           const __grid_constant__ CUtensorMap tk,
                           const __grid_constant__ CUtensorMap tv,
                           const __grid_constant__ CUtensorMap tdo, const BwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  using Cfg = FusedBwd<HD, STAGES>;
  constexpr int BK = Cfg::BK, BQ = Cfg::BQ;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_atom(smem_raw);
  unsigned char* s_k = smem;
  unsigned char* s_v = smem + Cfg::kKvBytes;
  auto s_q = [&](int stage) { return smem + 2 * Cfg::kKvBytes + stage * Cfg::kQBytes; };
  auto s_do = [&](int stage) { return smem + 2 * Cfg::kKvBytes + (STAGES + stage) * Cfg::kQBytes; };
  auto s_ds = [&](int buf) { return smem + Cfg::kDsOffset + buf * Cfg::kDsBytes; };
  auto s_dq = [&](int buf) {
    return reinterpret_cast<float*>(smem + Cfg::kDqOffset + buf * Cfg::kDqBytes);
  };
  auto* bars = reinterpret_cast<std::uint64_t*>(smem + Cfg::kBarOffset);
  std::uint64_t* kv_full = bars;
  std::uint64_t* full = bars + 1;
  std::uint64_t* empty = bars + 1 + STAGES;
  std::uint64_t* dq_full = bars + 1 + 2 * STAGES;
  std::uint64_t* dq_empty = dq_full + 2;
  constexpr bool kSplitN = HD == 128;  // dQ's columns split between the consumers

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  // The last key tiles first: dq_ordered.cuh's order needs the blocks a
  // block waits on launched before it.
  const KeyTileBlock<BK, BQ> blk(a, static_cast<int>(gridDim.x - 1 - blockIdx.x));
  if (tid == 0) init_barriers<STAGES, kSplitN>(kv_full, full, empty, dq_full, dq_empty);
  __syncthreads();

  const int n_qt = (a.seq + BQ - 1) / BQ;
  const int kt = blk.k0 / BK;
  auto share_of = [&](int it) { return dq_share_of<HD>(a, blk, n_qt, kt, it); };

  if (wg == 0) {
    producer<HD, BK, BQ, STAGES>(&tq, &tk, &tv, &tdo, blk, a, s_k, s_v, s_q(0), s_do(0), kv_full,
                                 full, empty, share_of, s_dq, dq_full, dq_empty, kt, tid);
    return;
  }

  consumer<T, HD, BK, BQ, STAGES>(a, blk, s_k, s_v, s_q, s_do, s_ds, s_dq, kv_full, full, empty,
                                  dq_full, dq_empty, tid, wg);
#endif
}

// dQ from the accumulator the fused kernel summed into: the inverse RoPE,
// the scale, one rounding. One thread per 4 columns of a (token, head).
template <typename T, int HD>
__global__ void flash_bwd_dq_convert_kernel(const BwdArgs a, std::int64_t quads) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= quads) return;
  const int col = static_cast<int>(i % (HD / 4)) * 4;
  const std::int64_t row = i / (HD / 4);  // (b * H + h) * S + s
  const int pos = static_cast<int>(row % a.seq);
  const std::int64_t bh = row / a.seq;
  const int h = static_cast<int>(bh % a.heads);
  const std::int64_t b = bh / a.heads;
  float4 v = __ldcs(reinterpret_cast<const float4*>(a.dq_acc) + i);
  if (a.rope != nullptr) {
    const float2* cs = reinterpret_cast<const float2*>(a.rope) +
                       static_cast<std::int64_t>(pos) * (HD / 2) + col / 2;
    rope_unrotate(v.x, v.y, cs[0]);
    rope_unrotate(v.z, v.w, cs[1]);
  }
  T* out =
      static_cast<T*>(a.dq) + (b * a.seq + pos) * a.ld_dq + static_cast<std::int64_t>(h) * HD + col;
  *reinterpret_cast<uint2*>(out) =
      make_uint2(pack2<T>(v.x * a.scale, v.y * a.scale), pack2<T>(v.z * a.scale, v.w * a.scale));
}

}  // namespace

template <typename T, int HD>
void launch_backward_fused(const BwdArgs& args, const Mat& q, const Mat& k, const Mat& v,
                           const Mat& dout, const FlashDims& d, cudaStream_t stream) {
  using Cfg = FusedBwd<HD, 2>;
  constexpr auto kernel = flash_bwd_fused_kernel<T, HD, 2>;
  allow_smem<kernel>(Cfg::smem);
  const CUtensorMap tq = tma_map_2d(q, Cfg::BQ);
  const CUtensorMap tk = tma_map_2d(k, Cfg::BK);
  const CUtensorMap tv = tma_map_2d(v, Cfg::BK);
  const CUtensorMap tdo = tma_map_2d(dout, Cfg::BQ);
  launch_kernel(kernel, dim3(tiles(d.seq, Cfg::BK), d.kv_heads, d.batch), Cfg::kThreads, Cfg::smem,
                stream, tq, tk, tv, tdo, args);
  CUDA_CHECK_LAUNCH();
  const std::int64_t quads = static_cast<std::int64_t>(d.batch) * d.heads * d.seq * (HD / 4);
  constexpr int kConvertThreads = 256;
  launch_kernel(flash_bwd_dq_convert_kernel<T, HD>,
                static_cast<unsigned>((quads + kConvertThreads - 1) / kConvertThreads),
                kConvertThreads, 0, stream, args, quads);
  CUDA_CHECK_LAUNCH();
}

#define TINYLLAMA_BWD_FUSED(T, HD)                                                               \
  template void launch_backward_fused<T, HD>(const BwdArgs&, const Mat&, const Mat&, const Mat&, \
                                             const Mat&, const FlashDims&, cudaStream_t);
TINYLLAMA_BWD_FUSED(__nv_bfloat16, 64)
TINYLLAMA_BWD_FUSED(__nv_bfloat16, 128)
TINYLLAMA_BWD_FUSED(__half, 64)
TINYLLAMA_BWD_FUSED(__half, 128)
#undef TINYLLAMA_BWD_FUSED

}  // namespace tinyllama::cuda::flash
