// The SwiGLU GEMM as a persistent ping-pong kernel (SwigluGemmKernel::
// PingPong, the default): one block an SM walks the tiles in steps of the
// grid. Warpgroup 0 is the producer: one thread streams every tile's k steps
// by TMA through a ring of 6 stages (192 KiB) and gives its registers back.
// Warpgroups 1 and 2 are consumers that take the block's tiles in turns,
// each a whole 128 x 128 tile (two m64n128 products per k16), and take turns
// at the tensor cores too (named barriers 2 and 3): while one runs its
// products, the other runs its epilogue (the SwiGLU, memory-bound), so the
// epilogue hides under the products as in CUTLASS's ping-pong schedule. A
// stage is released by the consumer that read it.
#include "device/cuda_check.h"
#include "device/cuda_launch.cuh"
#include "device/cuda_launch.h"
#include "ops/swiglu/swiglu_gemm/kernels.h"
#include "ops/swiglu/swiglu_gemm/tiles.cuh"

namespace tinyllama::cuda::swiglu_gemm {
namespace {

constexpr int kStages = 6;
constexpr int kThreads = 384;  // producer + two consumers
constexpr std::size_t kSmem = kSwizzleAtomBytes + kStages * kStageBytes + 2 * kStages * 8;
constexpr int kTurnBarrier = 2;  // + consumer index: "your turn at the tensor cores"

// Counts this warpgroup's threads into a named barrier the other
// warpgroup waits at, without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <typename T, Epi E>
__global__ void __launch_bounds__(kThreads, 1)
    pingpong_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                    const EpiArgs a) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = arch::align_atom(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(smem + kStages * kStageBytes);
  std::uint64_t* empty = full + kStages;
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const int m_tiles = tiles_m(a);
  const int n_tiles = tiles_n(E, a);
  const int total = m_tiles * n_tiles;
  const int first = static_cast<int>(blockIdx.x);
  const int step = static_cast<int>(gridDim.x);
  const int nk = (a.k + kBK - 1) / kBK;
  auto a_tile = [&](int s) { return smem + s * kStageBytes; };
  auto b_tile = [&](int s) { return smem + s * kStageBytes + kATileBytes; };

  if (tid == 0) init_stage_barriers<kStages>(full, empty, 1);
  __syncthreads();
  pdl_wait_previous();  // first read of global memory: PDL (device/cuda_launch.cuh)
  pdl_allow_next();

  if (wg == 0) {  // the producer
    arch::regs_dec<40>();
    if (tid == 0) {
      int g = 0;  // k steps issued by this block, over its tiles
      for (int i = first; i < total; i += step) {
        const TileIndex tile = tile_of(i, m_tiles, n_tiles);
        for (int kt = 0; kt < nk; ++kt, ++g) {
          const int s = g % kStages;
          if (g >= kStages) arch::mbar_wait(&empty[s], ((g / kStages) - 1) & 1);
          issue_kstep<E>(a_tile(s), b_tile(s), &ta, &tb, a.ffn, tile.tm, tile.tn, kt, &full[s]);
        }
      }
    }
    return;
  }
  arch::regs_inc<232>();
  const int c = wg - 1;
  const int wg_tid = tid & 127;
  int local = 0;  // this block's tiles so far, both consumers'
  for (int i = first; i < total; i += step, ++local) {
    if ((local & 1) != c) continue;
    const TileIndex tile = tile_of(i, m_tiles, n_tiles);
    const int g0 = local * nk;
    if (local > 0) arch::named_barrier(kTurnBarrier + c, 256);  // the other's products are issued
    // Not zeroed: the first product ignores its old values (scale_d 0).
    float acc0[kBN / 8][4], acc1[kBN / 8][4];
    for (int kt = 0; kt < nk; ++kt) {
      const int g = g0 + kt;
      const int s = g % kStages;
      arch::mbar_wait(&full[s], (g / kStages) & 1);
      const unsigned a_addr = smem_u32(a_tile(s));
      const unsigned b_addr = smem_u32(b_tile(s));
      arch::wgmma_fence();
      mma_kstep<T, E>(acc0, a_addr, b_addr, kt == 0);
      mma_kstep<T, E>(acc1, a_addr + 64 * kSwizzleRowBytes, b_addr, kt == 0);
      arch::wgmma_commit();
      arch::wgmma_wait<1>();  // the step before this one has been read
      if (kt > 0 && wg_tid == 0) arch::mbar_arrive(&empty[(g - 1) % kStages]);
    }
    arch::wgmma_wait<0>();
    if (wg_tid == 0) arch::mbar_arrive(&empty[(g0 + nk - 1) % kStages]);
    // The tensor cores to the other consumer, if the block has a next tile.
    if (i + step < total) named_barrier_arrive(kTurnBarrier + (c ^ 1), 256);
    arch::fence_regs(acc0);
    arch::fence_regs(acc1);
    epilogue<T, E>(acc0, tile.tm * kBM, tile.tn, a, wg_tid);
    epilogue<T, E>(acc1, tile.tm * kBM + 64, tile.tn, a, wg_tid);
  }
#else
  (void)ta;
  (void)tb;
  (void)a;
#endif
}

}  // namespace

template <typename T, Epi E>
void launch_pingpong(const CUtensorMap& ta, const CUtensorMap& tb, const EpiArgs& args,
                     cudaStream_t stream) {
  constexpr auto kernel = pingpong_kernel<T, E>;
  allow_smem<kernel>(kSmem);
  const int grid = std::min(tiles_total(E, args), current_device_sm_count());
  launch_kernel(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), kSmem, stream, ta, tb,
                args);
  CUDA_CHECK_LAUNCH();
}

template void launch_pingpong<__nv_bfloat16, Epi::Forward>(const CUtensorMap&, const CUtensorMap&,
                                                           const EpiArgs&, cudaStream_t);
template void launch_pingpong<__nv_bfloat16, Epi::Backward>(const CUtensorMap&, const CUtensorMap&,
                                                            const EpiArgs&, cudaStream_t);
template void launch_pingpong<__half, Epi::Forward>(const CUtensorMap&, const CUtensorMap&,
                                                    const EpiArgs&, cudaStream_t);
template void launch_pingpong<__half, Epi::Backward>(const CUtensorMap&, const CUtensorMap&,
                                                     const EpiArgs&, cudaStream_t);

}  // namespace tinyllama::cuda::swiglu_gemm
