// LossImpl::Chunked's cross-entropy: the per-row loss and the logits'
// gradient in one kernel, dlogits written over the logits. One block per
// row, fp32 math whatever the logits' dtype, 16-byte loads where the row
// allows. Two passes over the row instead of the unfused pair's five (the
// forward's max and sum, the backward's max, sum and write): the first keeps
// a running max and a sum rescaled to it per thread, the second writes
// (softmax - onehot) * scale. Under the chunked loss a row of logits was
// just written by the head GEMM of its chunk, so both passes mostly hit L2.
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_launch.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_vec.cuh"

namespace tinyllama::cuda {
namespace {

// Adds x to a running (max, sum of exp(x - max)).
__device__ __forceinline__ void online_add(float x, float& m, float& s) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;
    m = x;
  } else {
    s += expf(x - m);
  }
}

template <typename T, int Vec>
__global__ void cross_entropy_fused_kernel(float* __restrict__ losses, std::int64_t ld_loss,
                                           T* logits, std::int64_t ld,
                                           const std::int32_t* __restrict__ targets,
                                           std::int64_t cols, const float* __restrict__ scale_at) {
  pdl_wait_previous();  // first: PDL (cuda/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t r = blockIdx.x;
  T* row = logits + r * ld;
  const std::int64_t vec_cols = cols / Vec * Vec;
  float m = -INFINITY, s = 0.f;
  for (std::int64_t c = threadIdx.x * Vec; c < vec_cols; c += blockDim.x * Vec) {
    float v[Vec];
    load_f32<Vec>(row + c, v);
#pragma unroll
    for (int k = 0; k < Vec; ++k) online_add(v[k], m, s);
  }
  for (std::int64_t c = vec_cols + threadIdx.x; c < cols; c += blockDim.x) {
    online_add(to_f32(row[c]), m, s);
  }
  const float row_max = block_max(m);
  // A thread that saw no column keeps s = 0 (and m = -inf): nothing to add.
  const float row_sum = block_sum(s > 0.f ? s * expf(m - row_max) : 0.f);
  const std::int32_t t = targets[r];
  const bool valid = t >= 0 && t < cols;
  // Read before the write pass below overwrites it (the block sums above
  // end with a barrier, and this read happens before the next one).
  const float target_logit = valid ? to_f32(row[t]) : 0.f;
  if (threadIdx.x == 0) {
    losses[r * ld_loss] = valid ? row_max + logf(row_sum) - target_logit : NAN;
  }
  __syncthreads();                // every thread has read row[t] before anyone writes it
  const float scale = *scale_at;  // read when the kernel runs: a replay sees this step's
  const float inv = 1.f / row_sum;
  for (std::int64_t c = threadIdx.x * Vec; c < vec_cols; c += blockDim.x * Vec) {
    float v[Vec];
    load_f32<Vec>(row + c, v);
#pragma unroll
    for (int k = 0; k < Vec; ++k) {
      const float p = expf(v[k] - row_max) * inv;
      v[k] = valid ? (p - (c + k == t ? 1.f : 0.f)) * scale : NAN;
    }
    store_f32<Vec>(row + c, v);
  }
  for (std::int64_t c = vec_cols + threadIdx.x; c < cols; c += blockDim.x) {
    const float p = expf(to_f32(row[c]) - row_max) * inv;
    row[c] = from_f32<T>(valid ? (p - (c == t ? 1.f : 0.f)) * scale : NAN);
  }
}

}  // namespace

void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                         const float* scale_on_device, cudaStream_t stream) {
  const char* name = "cross_entropy_fused";
  require(logits.rows <= 2147483647, name, "too many rows");
  require(losses.rows == logits.rows && losses.cols == 1, name, "losses must be [rows, 1]");
  require_dtype(name, losses, DType::F32);
  require(scale_on_device != nullptr, name, "scale pointer is null");
  if (logits.rows == 0) return;
  dispatch_float(logits.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Vectors need every row start aligned; the columns past the last whole
    // vector go one by one, so an odd vocabulary still takes the wide path.
    const bool wide = logits.ld % kMaxVec<T> == 0 && aligned_for<T>(logits.data, kMaxVec<T>);
    dispatch_vec<T>(wide ? kMaxVec<T> : 1, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      launch_kernel(cross_entropy_fused_kernel<T, kVec>, static_cast<unsigned>(logits.rows),
                    kThreads, 0, stream, losses.ptr<float>(), losses.ld, logits.ptr<T>(), logits.ld,
                    targets, logits.cols, scale_on_device);
      CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tinyllama::cuda
