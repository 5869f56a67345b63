// RMSNorm, y = x / sqrt(mean(x^2) + eps) * w, statistics in fp32. One block
// per row. The weight gradient sums over rows; doing that with atomics would
// make it depend on scheduling, so each block keeps its own column sums in
// shared memory, writes them as one row of a workspace, and a second kernel
// adds those rows in a fixed order.
#include <algorithm>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_ops.h"

namespace tinyllama::cuda {
namespace {

template <typename T, typename W>
__global__ void rmsnorm_forward_kernel(T* out, std::int64_t ld_out, float* __restrict__ rstd,
                                       std::int64_t ld_rstd, const T* x, std::int64_t ld_x,
                                       const W* __restrict__ w, std::int64_t dim, float eps) {
  const std::int64_t r = blockIdx.x;
  const T* xr = x + r * ld_x;
  float ss = 0.f;
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float v = to_f32(xr[c]);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
  T* yr = out + r * ld_out;
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    yr[c] = from_f32<T>(to_f32(xr[c]) * inv * to_f32(w[c]));
  }
  if (threadIdx.x == 0) rstd[r * ld_rstd] = inv;
}

// dx_c = r * dy_c * w_c - r^3 / D * x_c * sum_j(dy_j * w_j * x_j)
// dw_c = sum over rows of dy_c * x_c * r
// dx may alias dy or x (no __restrict__ on them): every element is read by the
// thread that writes it, before the write.
template <typename T, typename W>
__global__ void rmsnorm_backward_kernel(T* dx, std::int64_t ld_dx, float* __restrict__ partials,
                                        const T* dy, std::int64_t ld_dy, const T* __restrict__ x,
                                        std::int64_t ld_x, const W* __restrict__ w,
                                        const float* __restrict__ rstd, std::int64_t ld_rstd,
                                        std::int64_t rows, std::int64_t dim) {
  extern __shared__ float dw_acc[];  // [dim], column c owned by thread c % blockDim
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) dw_acc[c] = 0.f;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* dyr = dy + r * ld_dy;
    const T* xr = x + r * ld_x;
    const float inv = rstd[r * ld_rstd];
    float dot = 0.f;
    for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      dot += to_f32(dyr[c]) * to_f32(w[c]) * to_f32(xr[c]);
    }
    const float coef = block_sum(dot) * inv * inv * inv / static_cast<float>(dim);
    T* dxr = dx + r * ld_dx;
    for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      const float g = to_f32(dyr[c]);
      const float xv = to_f32(xr[c]);
      dw_acc[c] += g * xv * inv;
      dxr[c] = from_f32<T>(inv * g * to_f32(w[c]) - coef * xv);
    }
  }
  float* mine = partials + static_cast<std::int64_t>(blockIdx.x) * dim;
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) mine[c] = dw_acc[c];
}

__global__ void sum_partials_kernel(float* __restrict__ dw, const float* __restrict__ partials,
                                    int blocks, std::int64_t dim) {
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; c < dim;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int b = 0; b < blocks; ++b) s += partials[b * dim + c];
    dw[c] = s;
  }
}

// Calls fn(TypeTag<T>, TypeTag<W>) for the activation and weight dtypes.
template <typename Fn>
void dispatch_pair(DType act, DType weight, const char* name, Fn&& fn) {
  dispatch_float(act, name,
                 [&](auto t) { dispatch_float(weight, name, [&](auto w) { fn(t, w); }); });
}

}  // namespace

void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps, cudaStream_t stream) {
  const char* name = "rmsnorm_forward";
  require_same_shape(name, out, x);
  require(out.dtype == x.dtype, name, "out and x must share one dtype");
  require(weight.numel() == x.cols && (weight.rows == 1 || weight.contiguous()), name,
          "weight " + shape_str(weight) + " for rows of " + std::to_string(x.cols));
  require(rstd.rows == x.rows && rstd.cols == 1, name, "rstd must be [rows, 1]");
  require_dtype(name, rstd, DType::F32);
  if (x.numel() == 0) return;
  dispatch_pair(x.dtype, weight.dtype, name, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    rmsnorm_forward_kernel<T, W><<<static_cast<unsigned>(x.rows), kThreads, 0, stream>>>(
        out.ptr<T>(), out.ld, rstd.ptr<float>(), rstd.ld, x.ptr<const T>(), x.ld,
        weight.ptr<const W>(), x.cols, static_cast<float>(eps));
    CUDA_CHECK_LAUNCH();
  });
}

void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd, float* partials,
                      std::int64_t capacity, cudaStream_t stream) {
  const char* name = "rmsnorm_backward";
  require_same_shape(name, dx, x);
  require_same_shape(name, dout, x);
  require(dx.dtype == x.dtype && dout.dtype == x.dtype, name,
          "dx, dout and x must share one dtype");
  require(weight.numel() == x.cols && (weight.rows == 1 || weight.contiguous()), name,
          "weight " + shape_str(weight) + " for rows of " + std::to_string(x.cols));
  require(dweight.numel() == x.cols && (dweight.rows == 1 || dweight.contiguous()), name,
          "dweight " + shape_str(dweight) + " for rows of " + std::to_string(x.cols));
  require_dtype(name, dweight, DType::F32);
  require_dtype(name, rstd, DType::F32);
  require(rstd.rows == x.rows, name, "rstd must be [rows, 1]");
  const std::int64_t dim = x.cols;
  if (dim == 0) return;
  const std::int64_t by_capacity = capacity / dim;
  require(by_capacity >= 1, name,
          "workspace not prepared for rows of " + std::to_string(dim) +
              " (prepare() sizes it from hidden_dim)");
  std::int64_t blocks = std::min<std::int64_t>(kRmsnormPartialRows, by_capacity);
  blocks = std::max<std::int64_t>(1, std::min(blocks, x.rows));
  const std::size_t smem = static_cast<std::size_t>(dim) * sizeof(float);
  require(smem <= 48 * 1024, name, "rows longer than 12288 are not supported");
  dispatch_pair(x.dtype, weight.dtype, name, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    rmsnorm_backward_kernel<T, W><<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(
        dx.ptr<T>(), dx.ld, partials, dout.ptr<const T>(), dout.ld, x.ptr<const T>(), x.ld,
        weight.ptr<const W>(), rstd.ptr<const float>(), rstd.ld, x.rows, dim);
    CUDA_CHECK_LAUNCH();
  });
  sum_partials_kernel<<<grid_for(dim), kThreads, 0, stream>>>(dweight.ptr<float>(), partials,
                                                              static_cast<int>(blocks), dim);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tinyllama::cuda
