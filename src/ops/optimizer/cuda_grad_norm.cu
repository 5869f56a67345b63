// The global gradient norm for clipping (UpdateRecipe), in two passes whose
// summation order depends on the tensor's size alone, so a clipped run gives
// the same coefficient every time it is replayed or resumed:
//   1. sum_squares_partials: a fixed grid of blocks, each summing its
//      grid-stride share of x^2 (fp32 per thread, double across the block)
//      into its own scratch slot;
//   2. add_partials: one block adds the slots in a fixed tree order to acc[0].
// clip_by_norm then turns acc[0] into the norm and
// torch.nn.utils.clip_grad_norm_'s coefficient, on the device, where the
// AdamW sweeps read it (StepScalars::clip).
#include <cmath>
#include <cstdint>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "model/backend.h"
#include "ops/optimizer/cuda_grad_norm.h"

namespace tinyllama::cuda {
namespace {

constexpr int kPartials = Backend::kSumSquaresScratch;

// Sum over the block in double, to thread 0; fixed order.
__device__ double block_sum_double(double v) {
  __shared__ double partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += partial[w];
  }
  return total;
}

template <typename T>
__global__ void sum_squares_partials(const T* __restrict__ x, std::int64_t ld, std::int64_t rows,
                                     std::int64_t cols, double* __restrict__ partials) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t n = rows * cols;
  float sum = 0.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols;
    const float v = to_f32(x[r * ld + (i - r * cols)]);
    sum = fmaf(v, v, sum);
  }
  const double total = block_sum_double(static_cast<double>(sum));
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// One block of kThreads: thread t sums slots t, t + kThreads, ... in order.
__global__ void add_partials(const double* __restrict__ partials, int count,
                             double* __restrict__ acc) {
  pdl_wait_previous();
  pdl_allow_next();
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  const double total = block_sum_double(sum);
  if (threadIdx.x == 0) acc[0] += total;
}

__global__ void clip_by_norm_kernel(const double* __restrict__ acc, double max_norm,
                                    StepScalars* __restrict__ step, float* __restrict__ norm) {
  pdl_wait_previous();
  pdl_allow_next();
  if (threadIdx.x != 0) return;
  const double value = sqrt(acc[0]) * step->unscale;
  *norm = static_cast<float>(value);
  if (max_norm > 0) step->clip = fmin(1.0, max_norm / (value + 1e-6));
}

}  // namespace

void sum_squares(Mat x, double* acc, cudaStream_t stream) {
  const char* name = "sum_squares";
  require(acc != nullptr, name, "accumulator pointer is null");
  if (x.numel() == 0) return;
  const unsigned blocks = grid_for(x.numel()) < kPartials ? grid_for(x.numel()) : kPartials;
  double* partials = acc + 1;
  dispatch_float(x.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(sum_squares_partials<T>, blocks, kThreads, 0, stream, x.ptr<const T>(), x.ld,
                  x.rows, x.cols, partials);
    CUDA_CHECK_LAUNCH();
  });
  launch_kernel(add_partials, 1, kThreads, 0, stream, static_cast<const double*>(partials),
                static_cast<int>(blocks), acc);
  CUDA_CHECK_LAUNCH();
}

void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm,
                  cudaStream_t stream) {
  require(acc != nullptr && step != nullptr && norm != nullptr, "clip_by_norm", "null pointer");
  launch_kernel(clip_by_norm_kernel, 1, 32, 0, stream, acc, max_norm, step, norm);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tinyllama::cuda
