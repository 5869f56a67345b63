// Per-position cross-entropy over the vocabulary, one block per row, in fp32
// whatever the logits' dtype. The backward pass recomputes the row's
// log-sum-exp instead of keeping it, and may overwrite the logits in place:
// every read of a row finishes (inside the block reductions) before the
// first write to it.
#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "ops/loss/cuda_cross_entropy.h"

namespace tinyllama::cuda {
namespace {

// Row maximum and sum of exp(x - max), reduced over the block.
template <typename T>
__device__ void row_softmax_stats(const T* row, std::int64_t cols, float* max_out, float* sum_out) {
  float m = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, to_f32(row[c]));
  m = block_max(m);
  float s = 0.f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(to_f32(row[c]) - m);
  *max_out = m;
  *sum_out = block_sum(s);
}

template <typename T>
__global__ void cross_entropy_forward_kernel(float* __restrict__ losses, std::int64_t ld_loss,
                                             const T* __restrict__ logits, std::int64_t ld,
                                             const std::int32_t* __restrict__ targets,
                                             std::int64_t cols) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t r = blockIdx.x;
  const T* row = logits + r * ld;
  float m, s;
  row_softmax_stats(row, cols, &m, &s);
  if (threadIdx.x == 0) {
    const std::int32_t t = targets[r];
    losses[r * ld_loss] = (t >= 0 && t < cols) ? m + logf(s) - to_f32(row[t]) : NAN;
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel(T* dlogits, std::int64_t ld_d, const T* logits,
                                              std::int64_t ld, const std::int32_t* targets,
                                              std::int64_t cols, float scale,
                                              const float* scale_on_device) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  // Read when the kernel runs, so a replayed graph sees this step's scale.
  if (scale_on_device != nullptr) scale = *scale_on_device;
  const std::int64_t r = blockIdx.x;
  const T* row = logits + r * ld;
  float m, s;
  row_softmax_stats(row, cols, &m, &s);
  const std::int32_t t = targets[r];
  const bool valid = t >= 0 && t < cols;
  const float inv = 1.f / s;
  T* drow = dlogits + r * ld_d;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float p = expf(to_f32(row[c]) - m) * inv;
    drow[c] = from_f32<T>(valid ? (p - (c == t ? 1.f : 0.f)) * scale : NAN);
  }
}

void check(const char* name, const Mat& logits) {
  require(logits.rows <= 2147483647, name, "too many rows");
}

void launch_cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                   float scale, const float* scale_on_device, cudaStream_t stream) {
  const char* name = "cross_entropy_backward";
  check(name, logits);
  require_same_shape(name, dlogits, logits);
  require(dlogits.dtype == logits.dtype, name, "dlogits and logits must share one dtype");
  if (logits.rows == 0) return;
  dispatch_float(logits.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(cross_entropy_backward_kernel<T>, static_cast<unsigned>(logits.rows), kThreads, 0,
                  stream, dlogits.ptr<T>(), dlogits.ld, logits.ptr<const T>(), logits.ld, targets,
                  logits.cols, scale, scale_on_device);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets,
                           cudaStream_t stream) {
  const char* name = "cross_entropy_forward";
  check(name, logits);
  require(losses.rows == logits.rows && losses.cols == 1, name, "losses must be [rows, 1]");
  require_dtype(name, losses, DType::F32);
  if (logits.rows == 0) return;
  dispatch_float(logits.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(cross_entropy_forward_kernel<T>, static_cast<unsigned>(logits.rows), kThreads, 0,
                  stream, losses.ptr<float>(), losses.ld, logits.ptr<const T>(), logits.ld, targets,
                  logits.cols);
    CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets, float scale,
                            cudaStream_t stream) {
  launch_cross_entropy_backward(dlogits, logits, targets, scale, nullptr, stream);
}

void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                            const float* scale_on_device, cudaStream_t stream) {
  require(scale_on_device != nullptr, "cross_entropy_backward", "scale pointer is null");
  launch_cross_entropy_backward(dlogits, logits, targets, 1.0f, scale_on_device, stream);
}

}  // namespace tinyllama::cuda
