// D = rowsum(dO * O), the softmax backward's correction, as a kernel of its
// own before the backward kernels (FlashDelta::Separate): fp32 [B*H, S] in
// the attention scratch (FlashScratch::delta). The default computes it in
// the dQ kernels' prologue instead (delta_rows.cuh); this one stays for the
// kernel bench and the tests, which check that both give the same bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/mat.h"
#include "device/cuda_common.cuh"
#include "ops/attention/flash/delta_rows.cuh"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/params.h"

namespace tinyllama::cuda::flash {
namespace {

constexpr int kDeltaWarps = 8;

// The fused backward's dQ order counters (dq_ordered.cuh), zeroed here
// because this kernel runs just before it; the grid has a thread for each
// (every counter stands for 64 rows).
__device__ __forceinline__ void zero_counters(int* counters, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) counters[i] = 0;
}

// One warp per (token, head); delta is [B*H, S].
template <typename T>
__global__ void flash_bwd_delta_kernel(float* __restrict__ delta, const T* __restrict__ dout,
                                       std::int64_t ld_dout, const T* __restrict__ out,
                                       std::int64_t ld_out, int seq, int heads, int hd,
                                       std::int64_t rows, int* __restrict__ counters,
                                       std::int64_t n_counters) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  zero_counters(counters, n_counters);
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(kDeltaWarps) + (threadIdx.x >> 5);
  if (r >= rows) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int h = static_cast<int>(r % heads);
  const std::int64_t token = r / heads;
  const float acc =
      delta_warp_row(dout + token * ld_dout + static_cast<std::int64_t>(h) * hd,
                     out + token * ld_out + static_cast<std::int64_t>(h) * hd, hd, lane);
  if (lane == 0) {
    const std::int64_t b = token / seq;
    const int s = static_cast<int>(token % seq);
    delta[(b * heads + h) * seq + s] = acc;
  }
}

// The same with 16-byte loads, for 16-byte aligned rows: DeltaVec's kLanes
// lanes share one (token, head) row. (The one-warp-per-row kernel reads 2
// bytes per lane per load and ran at a third of the memory bandwidth at
// B32 S1024.)
template <typename T, int HD>
__global__ void flash_bwd_delta_vec_kernel(float* __restrict__ delta, const T* __restrict__ dout,
                                           std::int64_t ld_dout, const T* __restrict__ out,
                                           std::int64_t ld_out, int seq, int heads,
                                           std::int64_t rows, int* __restrict__ counters,
                                           std::int64_t n_counters) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  zero_counters(counters, n_counters);
  constexpr int kLanes = DeltaVec<T, HD>::kLanes;
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t r = t / kLanes;
  const int part = static_cast<int>(t % kLanes);
  float acc = 0.f;
  if (r < rows) {  // no early exit: every lane takes part in the shuffles
    const int h = static_cast<int>(r % heads);
    const std::int64_t token = r / heads;
    acc = delta_vec_share<T, HD>(dout + token * ld_dout + static_cast<std::int64_t>(h) * HD,
                                 out + token * ld_out + static_cast<std::int64_t>(h) * HD, part);
  }
  acc = delta_vec_reduce<T, HD>(acc);
  if (r < rows && part == 0) {
    const std::int64_t token = r / heads;
    const int h = static_cast<int>(r % heads);
    delta[(token / seq * heads + h) * seq + token % seq] = acc;
  }
}

}  // namespace

template <typename T, int HD>
void launch_delta(float* delta, const Mat& dout, const Mat& out, bool vec, const FlashDims& d,
                  std::int64_t rows, cudaStream_t stream, int* counters, std::int64_t n_counters) {
  if (vec) {
    constexpr int kThreads = kDeltaWarps * 32;
    const std::int64_t threads = rows * DeltaVec<T, HD>::kLanes;
    launch_kernel(flash_bwd_delta_vec_kernel<T, HD>,
                  static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream,
                  delta, dout.ptr<const T>(), dout.ld, out.ptr<const T>(), out.ld, d.seq, d.heads,
                  rows, counters, n_counters);
  } else {
    const unsigned delta_blocks = static_cast<unsigned>((rows + kDeltaWarps - 1) / kDeltaWarps);
    launch_kernel(flash_bwd_delta_kernel<T>, delta_blocks, kDeltaWarps * 32, 0, stream, delta,
                  dout.ptr<const T>(), dout.ld, out.ptr<const T>(), out.ld, d.seq, d.heads, d.hd,
                  rows, counters, n_counters);
  }
  CUDA_CHECK_LAUNCH();
}

template void launch_delta<float, 32>(float*, const Mat&, const Mat&, bool, const FlashDims&,
                                      std::int64_t, cudaStream_t, int*, std::int64_t);
template void launch_delta<float, 64>(float*, const Mat&, const Mat&, bool, const FlashDims&,
                                      std::int64_t, cudaStream_t, int*, std::int64_t);
template void launch_delta<float, 128>(float*, const Mat&, const Mat&, bool, const FlashDims&,
                                       std::int64_t, cudaStream_t, int*, std::int64_t);
template void launch_delta<__nv_bfloat16, 32>(float*, const Mat&, const Mat&, bool,
                                              const FlashDims&, std::int64_t, cudaStream_t, int*,
                                              std::int64_t);
template void launch_delta<__nv_bfloat16, 64>(float*, const Mat&, const Mat&, bool,
                                              const FlashDims&, std::int64_t, cudaStream_t, int*,
                                              std::int64_t);
template void launch_delta<__nv_bfloat16, 128>(float*, const Mat&, const Mat&, bool,
                                               const FlashDims&, std::int64_t, cudaStream_t, int*,
                                               std::int64_t);
template void launch_delta<__half, 32>(float*, const Mat&, const Mat&, bool, const FlashDims&,
                                       std::int64_t, cudaStream_t, int*, std::int64_t);
template void launch_delta<__half, 64>(float*, const Mat&, const Mat&, bool, const FlashDims&,
                                       std::int64_t, cudaStream_t, int*, std::int64_t);
template void launch_delta<__half, 128>(float*, const Mat&, const Mat&, bool, const FlashDims&,
                                        std::int64_t, cudaStream_t, int*, std::int64_t);
template void launch_delta<float, 96>(float*, const Mat&, const Mat&, bool, const FlashDims&,
                                      std::int64_t, cudaStream_t, int*, std::int64_t);
template void launch_delta<__nv_bfloat16, 96>(float*, const Mat&, const Mat&, bool,
                                              const FlashDims&, std::int64_t, cudaStream_t, int*,
                                              std::int64_t);
template void launch_delta<__half, 96>(float*, const Mat&, const Mat&, bool, const FlashDims&,
                                       std::int64_t, cudaStream_t, int*, std::int64_t);

}  // namespace tinyllama::cuda::flash
