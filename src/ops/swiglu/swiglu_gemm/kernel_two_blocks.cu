// The SwiGLU GEMM with two blocks an SM (SwigluGemmKernel::TwoBlocks): a
// 128 x 128 tile per block, two warpgroups of 64 rows each, operands brought
// by TMA through a ring of 3 stages. Thread 0 starts the copies; a "full"
// barrier per stage says it has landed, an "empty" barrier (one arrival per
// warpgroup) that both are done reading it. No warp is a producer: at 96 KiB
// of stages and at most 128 registers a thread two blocks share an SM, so one
// block's epilogue (memory-bound) can run under the other's products. The
// first form; measured slower than kernel_pingpong.cu and than cuBLASLt +
// the fused kernel (docs/PERFORMANCE.md): kept for the bench.
#include "device/cuda_check.h"
#include "device/cuda_launch.cuh"
#include "ops/swiglu/swiglu_gemm/kernels.h"
#include "ops/swiglu/swiglu_gemm/tiles.cuh"

namespace tinyllama::cuda::swiglu_gemm {
namespace {

constexpr int kStages = 3;
constexpr int kThreads = 256;
constexpr std::size_t kSmem = kSwizzleAtomBytes + kStages * kStageBytes + 2 * kStages * 8;

template <typename T, Epi E>
__global__ void __launch_bounds__(kThreads, 2)
    two_blocks_kernel(const __grid_constant__ CUtensorMap ta,
                      const __grid_constant__ CUtensorMap tb, const EpiArgs a) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = arch::align_atom(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(smem + kStages * kStageBytes);
  std::uint64_t* empty = full + kStages;
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const TileIndex tile = tile_of(static_cast<int>(blockIdx.x), tiles_m(a), tiles_n(E, a));

  if (tid == 0) init_stage_barriers<kStages>(full, empty, 2);
  __syncthreads();
  pdl_wait_previous();  // first read of global memory: PDL (device/cuda_launch.cuh)
  pdl_allow_next();

  const int nk = (a.k + kBK - 1) / kBK;
  auto a_tile = [&](int s) { return smem + s * kStageBytes; };
  auto b_tile = [&](int s) { return smem + s * kStageBytes + kATileBytes; };
  auto issue = [&](int kt) {
    const int s = kt % kStages;
    issue_kstep<E>(a_tile(s), b_tile(s), &ta, &tb, a.ffn, tile.tm, tile.tn, kt, &full[s]);
  };
  if (tid == 0) {
    for (int kt = 0; kt < min(kStages, nk); ++kt) issue(kt);
  }

  // Not zeroed: the first product ignores its old values (scale_d 0), and a
  // zeroing move between the asynchronous products would serialise them.
  float acc[kBN / 8][4];
  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % kStages;
    arch::mbar_wait(&full[s], (kt / kStages) & 1);
    arch::wgmma_fence();
    mma_kstep<T, E>(acc, smem_u32(a_tile(s)) + wg * 64 * kSwizzleRowBytes, smem_u32(b_tile(s)),
                    kt == 0);
    arch::wgmma_commit();
    arch::wgmma_wait<1>();  // the step before this one has been read
    if (kt > 0) {
      const int prev = (kt - 1) % kStages;
      if ((tid & 127) == 0) arch::mbar_arrive(&empty[prev]);
      if (tid == 0 && kt - 1 + kStages < nk) {
        arch::mbar_wait(&empty[prev], ((kt - 1) / kStages) & 1);
        issue(kt - 1 + kStages);
      }
    }
  }
  arch::wgmma_wait<0>();
  arch::fence_regs(acc);
  epilogue<T, E>(acc, tile.tm * kBM + wg * 64, tile.tn, a, tid & 127);
#else
  (void)ta;
  (void)tb;
  (void)a;
#endif
}

}  // namespace

template <typename T, Epi E>
void launch_two_blocks(const CUtensorMap& ta, const CUtensorMap& tb, const EpiArgs& args,
                       cudaStream_t stream) {
  constexpr auto kernel = two_blocks_kernel<T, E>;
  allow_smem<kernel>(kSmem);
  launch_kernel(kernel, dim3(static_cast<unsigned>(tiles_total(E, args))), dim3(kThreads), kSmem,
                stream, ta, tb, args);
  CUDA_CHECK_LAUNCH();
}

template void launch_two_blocks<__nv_bfloat16, Epi::Forward>(const CUtensorMap&, const CUtensorMap&,
                                                             const EpiArgs&, cudaStream_t);
template void launch_two_blocks<__nv_bfloat16, Epi::Backward>(const CUtensorMap&,
                                                              const CUtensorMap&, const EpiArgs&,
                                                              cudaStream_t);
template void launch_two_blocks<__half, Epi::Forward>(const CUtensorMap&, const CUtensorMap&,
                                                      const EpiArgs&, cudaStream_t);
template void launch_two_blocks<__half, Epi::Backward>(const CUtensorMap&, const CUtensorMap&,
                                                       const EpiArgs&, cudaStream_t);

}  // namespace tinyllama::cuda::swiglu_gemm
