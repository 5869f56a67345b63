// The warp-specialised Hopper forward (bf16 / fp16, sm_90a): one producer
// warpgroup streams the K and V tiles by TMA into a ring of STAGES
// shared-memory stages, two consumer warpgroups (64 query rows each) run
// Q K^T, the online softmax and P V on wgmma as the tiles land. Barriers
// per stage say when a tile has landed (the producer's expected bytes) and
// when both consumers are done with it; the consumers never wait for each
// other. The producer gives registers back (setmaxnreg) so the consumers
// hold their accumulators without spilling. Same contract as forward_tc.cu;
// rows must allow 16-byte accesses. With RoPE fused (FwdArgs::rope) the
// producer's other three warps rotate each K tile once it has landed and
// then release it to the consumers, who rotate their own Q rows; the same
// three warps write the rotated q, k and v's copy out at the end.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device/arch/tma_maps.h"
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

template <int HD, int BK, int STAGES>
struct WsFwd {
  static constexpr int kThreads = 3 * 128;  // producer + two consumers
  static constexpr int BQ = 128;
  static constexpr int kQWgBytes = 64 * HD * 2;
  static constexpr int kKvBytes = BK * HD * 2;
  static constexpr int kQBytes = 2 * kQWgBytes;
  static constexpr int kBarOffset = kQBytes + 2 * STAGES * kKvBytes;
  // Barriers: Q landed, K landed [STAGES], V landed [STAGES], stage free
  // [STAGES], K rotated [STAGES] (RoPE fused only).
  static constexpr std::size_t smem =
      kSwizzleAtomBytes + kBarOffset + (1 + 4 * STAGES) * sizeof(std::uint64_t);
  static constexpr int kRotators = 96;  // the producer's warps 1-3
};

// The steps below exist only where wgmma and TMA do (sm_90a); so does the
// kernel's body.
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// Barrier set-up (one thread): Q landed, and per stage K landed, V landed,
// the stage free again (one arrival per consumer warpgroup) and K rotated.
template <int STAGES>
__device__ __forceinline__ void init_barriers(std::uint64_t* q_full, std::uint64_t* k_full,
                                              std::uint64_t* v_full, std::uint64_t* empty,
                                              std::uint64_t* k_rotated) {
  mbar_init(q_full, 1);
  for (int s = 0; s < STAGES; ++s) {
    mbar_init(k_full + s, 1);
    mbar_init(v_full + s, 1);
    mbar_init(empty + s, 2);  // one arrival per consumer warpgroup
    mbar_init(k_rotated + s, 1);
  }
  mbar_init_fence();
}

// The producer thread: both consumers' Q rows (q_full), then every key
// tile's K and V into stage kt % STAGES (k_full, v_full) once both
// consumers have released it (empty).
template <typename Cfg, int HD, int BK, int STAGES, typename Block, typename QTile, typename KStage,
          typename VStage>
__device__ __forceinline__ void produce(const CUtensorMap* tq, const CUtensorMap* tk,
                                        const CUtensorMap* tv, const Block& blk, const QTile& s_qw,
                                        const KStage& s_k, const VStage& s_v, std::uint64_t* q_full,
                                        std::uint64_t* k_full, std::uint64_t* v_full,
                                        std::uint64_t* empty) {
  const int q_row = static_cast<int>(blk.tok0) + blk.q0;
  mbar_expect_tx(q_full, Cfg::kQBytes);
  for (int c = 0; c < 2; ++c) {
    for (int cb = 0; cb < HD / 64; ++cb) {
      tma_load_2d(s_qw(c) + cb * 64 * kSwizzleRowBytes, tq, blk.h * HD + cb * 64, q_row + 64 * c,
                  q_full);
    }
  }
  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int stage = kt % STAGES;
    if (kt >= STAGES) mbar_wait(empty + stage, ((kt / STAGES) - 1) & 1);
    const int row = static_cast<int>(blk.tok0) + kt * BK;
    mbar_expect_tx(k_full + stage, Cfg::kKvBytes);
    for (int cb = 0; cb < HD / 64; ++cb) {
      tma_load_2d(s_k(stage) + cb * BK * kSwizzleRowBytes, tk, blk.kvh * HD + cb * 64, row,
                  k_full + stage);
    }
    mbar_expect_tx(v_full + stage, Cfg::kKvBytes);
    for (int cb = 0; cb < HD / 64; ++cb) {
      tma_load_2d(s_v(stage) + cb * BK * kSwizzleRowBytes, tv, blk.kvh * HD + cb * 64, row,
                  v_full + stage);
    }
  }
}

// The producer's warps 1-3 with RoPE fused (rt: 0 to 95): each K tile
// rotated once it has landed, then released to the consumers (k_rotated);
// at the end the rotated q, k and v's copy written out. A stage is refilled
// only once both consumers released it, and they wait for its rotation
// first: the rotators are never a lap behind.
template <typename T, typename Cfg, int HD, int BK, int STAGES, typename Block, typename KStage>
__device__ __forceinline__ void rotate_k_tiles(const FwdArgs& a, const Block& blk,
                                               const KStage& s_k, std::uint64_t* k_full,
                                               std::uint64_t* k_rotated, int rt) {
  constexpr int kRotators = Cfg::kRotators;
  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int stage = kt % STAGES;
    mbar_wait(k_full + stage, (kt / STAGES) & 1);
    rope_tile_sw128<T, BK, HD, kRotators>(s_k(stage), min(BK, a.seq - kt * BK), a.rope, kt * BK,
                                          rt);
    fence_proxy_async();  // the generic writes, before wgmma reads them
    named_barrier(5, kRotators);
    if (rt == 0) mbar_arrive(k_rotated + stage);
  }
  rope_write_block<T, HD, kRotators>(a, blk.tok0, blk.q0, blk.q_end, blk.h, 1, rt);
}

// The producer warpgroup: it gives registers back (the consumers hold the
// accumulators); one thread issues every copy, and with RoPE fused warps
// 1-3 rotate the K tiles.
template <typename T, typename Cfg, int HD, int BK, int STAGES, bool ROPE, typename Block,
          typename QTile, typename KStage, typename VStage>
__device__ __forceinline__ void producer(const CUtensorMap* tq, const CUtensorMap* tk,
                                         const CUtensorMap* tv, const FwdArgs& a, const Block& blk,
                                         const QTile& s_qw, const KStage& s_k, const VStage& s_v,
                                         std::uint64_t* q_full, std::uint64_t* k_full,
                                         std::uint64_t* v_full, std::uint64_t* empty,
                                         std::uint64_t* k_rotated, int tid) {
  regs_dec<40>();
  if (tid == 0) {
    produce<Cfg, HD, BK, STAGES>(tq, tk, tv, blk, s_qw, s_k, s_v, q_full, k_full, v_full, empty);
  } else if constexpr (ROPE) {
    if (tid >= 32) rotate_k_tiles<T, Cfg, HD, BK, STAGES>(a, blk, s_k, k_full, k_rotated, tid - 32);
  }
}

// A consumer's own 64 Q rows rotated in place (RoPE fused), visible to its
// wgmma and to all its warps.
template <typename T, int HD, typename Block, typename QTile>
__device__ __forceinline__ void rotate_q_rows(const FwdArgs& a, const Block& blk, const QTile& s_qw,
                                              int c, int wq0, int wtid) {
  rope_tile_sw128<T, 64, HD, 128>(s_qw(c), blk.q_end - wq0, a.rope, wq0, wtid);
  fence_proxy_async();
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
}

// A key tile after all of a consumer's rows: nothing to add, but the tile
// waited for all the same (a consumer that released stages unwaited could
// run a lap ahead and complete a phase of `empty` with its own two
// arrivals), and both its turns taken.
template <typename MyTurn, typename YourTurn>
__device__ __forceinline__ void skip_tile(std::uint64_t* k_ready, std::uint64_t* v_full,
                                          unsigned phase, const MyTurn& my_turn,
                                          const YourTurn& your_turn) {
  mbar_wait(k_ready, phase);
  mbar_wait(v_full, phase);
  my_turn();
  your_turn();
  my_turn();
  your_turn();
}

// S = Q K^T of one stage, issued in this consumer's turn (the turn passes as
// soon as it is issued) and waited for.
template <typename T, int HD, int BK, typename KStage, typename MyTurn, typename YourTurn>
__device__ __forceinline__ void scores_in_turn(float (&s)[BK / 8][4], std::uint64_t* k_ready,
                                               unsigned phase, unsigned q_addr, const KStage& s_k,
                                               int stage, const MyTurn& my_turn,
                                               const YourTurn& your_turn) {
  mbar_wait(k_ready, phase);
  const unsigned k_addr = smem_u32(s_k(stage));
  my_turn();
  wgmma_fence();
  issue_scores<T, HD, BK, 64>(s, q_addr, k_addr);
  wgmma_commit();
  your_turn();
  wgmma_wait<0>();
  fence_regs(s);
}

// O += P V of one stage once its V landed, issued in this consumer's turn
// and waited for.
template <typename T, int HD, int BK, typename VStage, typename MyTurn, typename YourTurn>
__device__ __forceinline__ void pv_in_turn(float (&o)[HD / 8][4], unsigned (&p)[BK / 16][4],
                                           std::uint64_t* v_full, unsigned phase, const VStage& s_v,
                                           int stage, const MyTurn& my_turn,
                                           const YourTurn& your_turn) {
  mbar_wait(v_full, phase);
  const unsigned v_addr = smem_u32(s_v(stage));
  my_turn();
  wgmma_fence();
  issue_pv<T, HD, BK>(o, p, v_addr);
  wgmma_commit();
  your_turn();
  wgmma_wait<0>();
  fence_regs(o);
  fence_regs(p);
}

// Ping-pong turns (PINGPONG only): consumer c waits on named barrier 3 + c
// before issuing products and then lets the other go (barrier 4 - c); the
// other consumer's last wait has no arrival, so consumer 1 skips its last.
template <bool PINGPONG>
__device__ __forceinline__ void wait_turn(int c) {
  if constexpr (PINGPONG) asm volatile("bar.sync %0, 256;\n" ::"r"(3 + c) : "memory");
}
template <bool PINGPONG>
__device__ __forceinline__ void go_first(int c) {  // consumer 0 goes first
  if constexpr (PINGPONG) {
    if (c == 1) asm volatile("bar.arrive %0, 256;\n" ::"r"(3) : "memory");
  }
}
template <bool PINGPONG>
__device__ __forceinline__ void pass_turn(int c, int turn, int turns) {
  if constexpr (PINGPONG) {
    if (!(c == 1 && turn == turns - 1)) {
      asm volatile("bar.arrive %0, 256;\n" ::"r"(4 - c) : "memory");
    }
  }
}

// Every warp of a consumer warpgroup is done with the stage: release it
// once (one arrival of the two `empty` waits for).
__device__ __forceinline__ void release_stage(std::uint64_t* empty, int c, int wtid) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
  if (wtid == 0) mbar_arrive(empty);
}
#endif

// PINGPONG: the two consumers take turns issuing their products (named
// barriers 3 and 4), so one's softmax runs while the other's products keep
// the tensor cores busy (FlashAttention-3's inter-warpgroup schedule).
// ROPE: a.rope is set (rope_tiles.cuh); a template argument, so that the
// kernels without it compile as if it did not exist.
template <typename T, int HD, int BK, int STAGES, bool PINGPONG, bool ROPE>
__global__ void __launch_bounds__(WsFwd<HD, BK, STAGES>::kThreads, 1)
    flash_fwd_ws_kernel(const __grid_constant__ CUtensorMap tq,
                        const __grid_constant__ CUtensorMap tk,
                        const __grid_constant__ CUtensorMap tv, const FwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  using Cfg = WsFwd<HD, BK, STAGES>;
  constexpr int BQ = Cfg::BQ;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_atom(smem_raw);
  auto s_qw = [&](int c) { return smem + c * Cfg::kQWgBytes; };
  auto s_k = [&](int stage) { return smem + Cfg::kQBytes + stage * Cfg::kKvBytes; };
  auto s_v = [&](int stage) { return smem + Cfg::kQBytes + (STAGES + stage) * Cfg::kKvBytes; };
  auto* bars = reinterpret_cast<std::uint64_t*>(smem + Cfg::kBarOffset);
  std::uint64_t* q_full = bars;
  std::uint64_t* k_full = bars + 1;
  std::uint64_t* v_full = bars + 1 + STAGES;
  std::uint64_t* empty = bars + 1 + 2 * STAGES;
  std::uint64_t* k_rotated = bars + 1 + 3 * STAGES;

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const QueryTileBlock<BQ, BK> blk(a);
  if (tid == 0) init_barriers<STAGES>(q_full, k_full, v_full, empty, k_rotated);
  __syncthreads();

  if (wg == 0) {
    producer<T, Cfg, HD, BK, STAGES, ROPE>(&tq, &tk, &tv, a, blk, s_qw, s_k, s_v, q_full, k_full,
                                           v_full, empty, k_rotated, tid);
    return;
  }

  regs_inc<232>();
  const int c = wg - 1;  // consumer index
  const int wtid = tid & 127;
  const int warp = wtid >> 5;
  const int lane = tid & 31;
  const int t = lane & 3;
  const int wq0 = blk.q0 + c * 64;
  const int row0 = wq0 + warp * 16 + (lane >> 2);
  const int row1 = row0 + 8;
  const unsigned q_addr = smem_u32(s_qw(c));

  // Ping-pong turns (wait_turn, pass_turn), two a key tile.
  const int turns = 2 * blk.n_kt;
  int turn = 0;
  auto my_turn = [&] { wait_turn<PINGPONG>(c); };
  auto your_turn = [&] { pass_turn<PINGPONG>(c, turn++, turns); };
  go_first<PINGPONG>(c);

  float o[HD / 8][4];
  zero(o);
  SoftmaxRows st;
  mbar_wait(q_full, 0);
  if constexpr (ROPE) rotate_q_rows<T, HD>(a, blk, s_qw, c, wq0, wtid);
  // The K tile as the products read it: landed, and rotated if RoPE is fused.
  std::uint64_t* k_ready = ROPE ? k_rotated : k_full;
  for (int kt = 0; kt < blk.n_kt; ++kt) {
    const int stage = kt % STAGES;
    const unsigned phase = (kt / STAGES) & 1;
    // A key tile wholly after this warpgroup's last row adds nothing to it.
    if (kt * BK > wq0 + 63) {
      skip_tile(k_ready + stage, v_full + stage, phase, my_turn, your_turn);
    } else {
      float s[BK / 8][4];
      scores_in_turn<T, HD, BK>(s, k_ready + stage, phase, q_addr, s_k, stage, my_turn, your_turn);
      unsigned p[BK / 16][4];
      const float2 alpha = softmax_tile<T, BK>(s, p, st, a.scale_log2, kt * BK + BK - 1 > wq0,
                                               kt * BK, row0, row1, t);
      scale_rows<HD>(o, alpha);
      pv_in_turn<T, HD, BK>(o, p, v_full + stage, phase, s_v, stage, my_turn, your_turn);
    }
    release_stage(empty + stage, c, wtid);
  }

  // Each consumer stages through its own Q tile, which only it read.
  store_output_wgmma<T, HD>(a, blk, blk.h, wq0, s_qw(c), 64, 1 + c, o, st, warp, lane, wtid, t,
                            row0, row1);
#endif
}

template <typename T, int HD, int BK, int STAGES, bool PINGPONG, bool ROPE>
void launch_ws_kernel(const CUtensorMap& tq, const CUtensorMap& tk, const CUtensorMap& tv,
                      const FwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Cfg = WsFwd<HD, BK, STAGES>;
  constexpr auto kernel = flash_fwd_ws_kernel<T, HD, BK, STAGES, PINGPONG, ROPE>;
  allow_smem<kernel>(Cfg::smem);
  launch_kernel(kernel, dim3(tiles(d.seq, Cfg::BQ), d.heads, d.batch), Cfg::kThreads, Cfg::smem,
                stream, tq, tk, tv, args);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T, int HD, int BK, int STAGES, bool PINGPONG>
void launch_forward_ws(const FwdArgs& args, const Mat& q, const Mat& k, const Mat& v,
                       const FlashDims& d, cudaStream_t stream) {
  const CUtensorMap tq = tma_map_2d(q, 64);
  const CUtensorMap tk = tma_map_2d(k, BK);
  const CUtensorMap tv = tma_map_2d(v, BK);
  if (args.rope != nullptr) {
    launch_ws_kernel<T, HD, BK, STAGES, PINGPONG, true>(tq, tk, tv, args, d, stream);
  } else {
    launch_ws_kernel<T, HD, BK, STAGES, PINGPONG, false>(tq, tk, tv, args, d, stream);
  }
}

#define TINYLLAMA_FWD_WS(T, HD)                                                                    \
  template void launch_forward_ws<T, HD, 64, 2, false>(                                            \
      const FwdArgs&, const Mat&, const Mat&, const Mat&, const FlashDims&, cudaStream_t);         \
  template void launch_forward_ws<T, HD, 128, 2, false>(                                           \
      const FwdArgs&, const Mat&, const Mat&, const Mat&, const FlashDims&, cudaStream_t);         \
  template void launch_forward_ws<T, HD, 64, 2, true>(const FwdArgs&, const Mat&, const Mat&,      \
                                                      const Mat&, const FlashDims&, cudaStream_t); \
  template void launch_forward_ws<T, HD, 128, 2, true>(                                            \
      const FwdArgs&, const Mat&, const Mat&, const Mat&, const FlashDims&, cudaStream_t);
TINYLLAMA_FWD_WS(__nv_bfloat16, 64)
TINYLLAMA_FWD_WS(__nv_bfloat16, 128)
TINYLLAMA_FWD_WS(__half, 64)
TINYLLAMA_FWD_WS(__half, 128)
#undef TINYLLAMA_FWD_WS

}  // namespace tinyllama::cuda::flash
