// The Hopper backward (bf16 / fp16, sm_90a): backward_tc.cu's two
// deterministic kernels with every product on wgmma, one role per launch:
// dQ first (its prologue can write D), then dK/dV reading that D. The block
// bodies (tiles, products, masks, epilogues) are in
// backward_wgmma_bodies.cuh, shared with backward_one_launch.cu.
// Rows must allow 16-byte accesses (the dispatcher sends others to
// backward_tc.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "device/cuda_check.h"
#include "ops/attention/flash/backward_wgmma_bodies.cuh"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/params.h"
#include "ops/attention/flash/prologue.cuh"

namespace tinyllama::cuda::flash {
namespace {

using wgmma_bwd::kTile;
using wgmma_bwd::kWgThreads;

template <typename T, int HD>
__global__ void __launch_bounds__(kWgThreads) flash_bwd_dkdv_wgmma_kernel(const BwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  wgmma_bwd::dkdv_body<T, HD, false>(a, KeyTileBlock<kTile, kTile>(a));
}

template <typename T, int HD>
__global__ void __launch_bounds__(kWgThreads) flash_bwd_dq_wgmma_kernel(const BwdArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  wgmma_bwd::dq_body<T, HD>(a, QueryTileBlock<kTile, kTile>(a));
}

}  // namespace

template <typename T, int HD>
void launch_backward_dq_wgmma(const BwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Cfg = wgmma_bwd::Smem<HD>;
  constexpr auto dq = flash_bwd_dq_wgmma_kernel<T, HD>;
  allow_smem<dq>(Cfg::dq);
  launch_kernel(dq, dim3(tiles(d.seq, kTile), d.heads, d.batch), kWgThreads, Cfg::dq, stream, args);
  CUDA_CHECK_LAUNCH();
}

template <typename T, int HD>
void launch_backward_wgmma(const BwdArgs& args, const FlashDims& d, cudaStream_t stream) {
  using Cfg = wgmma_bwd::Smem<HD>;
  constexpr auto dkdv = flash_bwd_dkdv_wgmma_kernel<T, HD>;
  // dQ first: with dq_writes_delta its prologue writes the D that dK/dV reads.
  launch_backward_dq_wgmma<T, HD>(args, d, stream);
  allow_smem<dkdv>(Cfg::dkdv(false));
  launch_kernel(dkdv, dim3(tiles(d.seq, kTile), d.kv_heads, d.batch), kWgThreads, Cfg::dkdv(false),
                stream, args);
  CUDA_CHECK_LAUNCH();
}

#define TINYLLAMA_BWD_WGMMA(T, HD)                                                            \
  template void launch_backward_wgmma<T, HD>(const BwdArgs&, const FlashDims&, cudaStream_t); \
  template void launch_backward_dq_wgmma<T, HD>(const BwdArgs&, const FlashDims&, cudaStream_t);
TINYLLAMA_BWD_WGMMA(__nv_bfloat16, 64)
TINYLLAMA_BWD_WGMMA(__nv_bfloat16, 128)
TINYLLAMA_BWD_WGMMA(__half, 64)
TINYLLAMA_BWD_WGMMA(__half, 128)
#undef TINYLLAMA_BWD_WGMMA

}  // namespace tinyllama::cuda::flash
