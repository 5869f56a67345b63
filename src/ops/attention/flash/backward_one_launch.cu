// The Hopper backward in one launch (bf16 / fp16, sm_90a): the dK/dV and
// dQ blocks of backward_wgmma.cu in one grid, so they run side by side
// instead of one kernel after the other. In two launches the kernels'
// latencies add up and each one's last wave leaves SMs idle (the
// workshop's B8 S128: 64 dK/dV and 128 dQ blocks, under one wave each on
// 132 SMs); here the roles fill each other's gaps, and the step launches
// one kernel fewer per layer.
//
// What makes the roles independent: the dK/dV blocks compute D = rowsum(dO
// * O) for each query tile they visit from an O tile loaded beside dO
// (backward_wgmma_bodies.cuh, OWN_DELTA) instead of reading the D that the
// dQ kernel's prologue writes; the dQ blocks compute their own D as before.
// No block waits on another. The cost: every block takes the larger role's
// registers and shared memory, and dK/dV loads O and sums D once per tile
// pair, which is why the dispatcher takes it only for grids of a few
// waves.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "device/cuda_check.h"
#include "ops/attention/flash/backward_wgmma_bodies.cuh"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"

namespace tinyllama::cuda::flash {
namespace {

using wgmma_bwd::kTile;
using wgmma_bwd::kWgThreads;

// Blocks [0, n_dkdv) are dK/dV blocks (key tile fastest, then kv head,
// then batch: the two-kernel grid's order), the rest dQ blocks (query
// tile, head, batch).
template <typename T, int HD>
__global__ void __launch_bounds__(kWgThreads)
    flash_bwd_one_launch_kernel(const BwdArgs a, int n_kt, int kv_heads, int n_dkdv) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const int i = static_cast<int>(blockIdx.x);
  if (i < n_dkdv) {
    const int rest = i / n_kt;
    wgmma_bwd::dkdv_body<T, HD, true>(
        a, KeyTileBlock<kTile, kTile>(a, i % n_kt, rest % kv_heads, rest / kv_heads));
  } else {
    const int j = i - n_dkdv;
    const int rest = j / n_kt;  // as many query tiles as key tiles
    wgmma_bwd::dq_body<T, HD>(
        a, QueryTileBlock<kTile, kTile>(a, j % n_kt, rest % a.heads, rest / a.heads));
  }
}

}  // namespace

template <typename T, int HD>
void launch_backward_one_launch(const BwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Cfg = wgmma_bwd::Smem<HD>;
  constexpr auto kernel = flash_bwd_one_launch_kernel<T, HD>;
  const std::size_t smem = std::max(Cfg::dkdv(true), Cfg::dq);
  const int n_kt = static_cast<int>(tiles(d.seq, kTile));
  const long long n_dkdv = static_cast<long long>(n_kt) * d.kv_heads * d.batch;
  const long long n_dq = static_cast<long long>(n_kt) * d.heads * d.batch;
  require(n_dkdv + n_dq <= 0x7fffffffLL, "attention_backward (flash, one launch)",
          "too many blocks for one grid");
  allow_smem<kernel>(smem);
  launch_kernel(kernel, dim3(static_cast<unsigned>(n_dkdv + n_dq)), kWgThreads, smem, stream, args,
                n_kt, d.kv_heads, static_cast<int>(n_dkdv));
  CUDA_CHECK_LAUNCH();
}

#define TINYLLAMA_BWD_ONE_LAUNCH(T, HD) \
  template void launch_backward_one_launch<T, HD>(const BwdArgs&, const FlashDims&, cudaStream_t);
TINYLLAMA_BWD_ONE_LAUNCH(__nv_bfloat16, 64)
TINYLLAMA_BWD_ONE_LAUNCH(__nv_bfloat16, 128)
TINYLLAMA_BWD_ONE_LAUNCH(__half, 64)
TINYLLAMA_BWD_ONE_LAUNCH(__half, 128)
#undef TINYLLAMA_BWD_ONE_LAUNCH

}  // namespace tinyllama::cuda::flash
