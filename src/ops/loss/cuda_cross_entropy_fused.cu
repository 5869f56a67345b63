// LossImpl::Chunked's cross-entropy: the per-row loss and the logits'
// gradient in one kernel, dlogits written over the logits. One block per
// row, fp32 math whatever the logits' dtype, 16-byte loads where the row
// allows. Two passes over the row instead of the unfused pair's five (the
// forward's max and sum, the backward's max, sum and write): the first keeps
// a running max and a sum rescaled to it per thread, the second writes
// (softmax - onehot) * scale.
//
// Two kernels. The streamed one reads the row from global memory for each
// pass: right for short rows, whose second read hits L2. A chunk of a large
// vocabulary's logits is far larger than L2 (GPT-2's 50257 columns: 100 KB a
// bf16 row, 412 MB a chunk), so both passes read DRAM there: 3 row-sized
// transfers where 2 are needed. The staged one copies the row into shared
// memory once (cp.async, every load in flight at once), takes the max, the
// sum and the gradient from there and writes the gradient out: one read and
// one write of DRAM. The max and the sum are separate sweeps of shared
// memory, so each thread's exps are independent (the streamed kernel's
// online max chains them).

#include "device/arch/ptx.cuh"
#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_vec.cuh"
#include "ops/loss/cross_entropy_rows.h"
#include "ops/loss/cuda_cross_entropy.h"

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

// The gradient pass both kernels end with: (softmax - onehot) * scale of the
// logits in `from` (the row itself, or its copy in shared memory) written
// to `to`, NaN for a row whose target is out of range. `scale` is read
// from device memory when the kernel runs: a graph replay sees this step's.
template <int Vec, typename T>
__device__ __forceinline__ void write_gradient(T* to, const T* from, std::int64_t cols,
                                               float row_max, float row_sum, std::int32_t t,
                                               bool valid, float scale) {
  const std::int64_t vec_cols = cols / Vec * Vec;
  const float inv = 1.f / row_sum;
  for (std::int64_t c = threadIdx.x * Vec; c < vec_cols; c += blockDim.x * Vec) {
    float v[Vec];
    load_f32<Vec>(from + c, v);
#pragma unroll
    for (int k = 0; k < Vec; ++k) {
      const float p = expf(v[k] - row_max) * inv;
      v[k] = valid ? (p - (c + k == t ? 1.f : 0.f)) * scale : NAN;
    }
    store_f32<Vec>(to + c, v);
  }
  for (std::int64_t c = vec_cols + threadIdx.x; c < cols; c += blockDim.x) {
    const float p = expf(to_f32(from[c]) - row_max) * inv;
    to[c] = from_f32<T>(valid ? (p - (c == t ? 1.f : 0.f)) * scale : NAN);
  }
}

template <typename T, int Vec>
__global__ void cross_entropy_fused_kernel(float* __restrict__ losses, std::int64_t ld_loss,
                                           T* logits, std::int64_t ld,
                                           const std::int32_t* __restrict__ targets,
                                           std::int64_t cols, const float* __restrict__ scale_at) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
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
  __syncthreads();  // every thread has read row[t] before anyone writes it
  write_gradient<Vec>(row, row, cols, row_max, row_sum, t, valid, *scale_at);
}

constexpr int kStagedThreads = 512;

template <typename T, int Vec>
__global__ void __launch_bounds__(kStagedThreads)
    cross_entropy_staged_kernel(float* __restrict__ losses, std::int64_t ld_loss, T* logits,
                                std::int64_t ld, const std::int32_t* __restrict__ targets,
                                std::int64_t cols, const float* __restrict__ scale_at) {
  static_assert(Vec * sizeof(T) == 16, "rows are staged in 16-byte copies");
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  T* staged = reinterpret_cast<T*>(staged_bytes);
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t r = blockIdx.x;
  T* row = logits + r * ld;
  const std::int64_t vec_cols = cols / Vec * Vec;
  for (std::int64_t c = threadIdx.x * Vec; c < vec_cols; c += blockDim.x * Vec) {
    arch::cp_async_16(staged + c, row + c, true);
  }
  arch::cp_async_commit();
  for (std::int64_t c = vec_cols + threadIdx.x; c < cols; c += blockDim.x) staged[c] = row[c];
  arch::cp_async_wait<0>();
  __syncthreads();

  float m = -INFINITY;
  for (std::int64_t c = threadIdx.x * Vec; c < vec_cols; c += blockDim.x * Vec) {
    float v[Vec];
    load_f32<Vec>(staged + c, v);
#pragma unroll
    for (int k = 0; k < Vec; ++k) m = fmaxf(m, v[k]);
  }
  for (std::int64_t c = vec_cols + threadIdx.x; c < cols; c += blockDim.x) {
    m = fmaxf(m, to_f32(staged[c]));
  }
  const float row_max = block_max(m);
  float s = 0.f;
  for (std::int64_t c = threadIdx.x * Vec; c < vec_cols; c += blockDim.x * Vec) {
    float v[Vec];
    load_f32<Vec>(staged + c, v);
#pragma unroll
    for (int k = 0; k < Vec; ++k) s += expf(v[k] - row_max);
  }
  for (std::int64_t c = vec_cols + threadIdx.x; c < cols; c += blockDim.x) {
    s += expf(to_f32(staged[c]) - row_max);
  }
  const float row_sum = block_sum(s);
  const std::int32_t t = targets[r];
  const bool valid = t >= 0 && t < cols;
  if (threadIdx.x == 0) {
    losses[r * ld_loss] = valid ? row_max + logf(row_sum) - to_f32(staged[t]) : NAN;
  }
  write_gradient<Vec>(row, staged, cols, row_max, row_sum, t, valid, *scale_at);
}

// The most dynamic shared memory a block may opt in to, less what the block
// reductions declare statically.
std::int64_t staged_row_capacity() {
  static const std::int64_t bytes = [] {
    int device = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return static_cast<std::int64_t>(optin) - 2 * 32 * static_cast<std::int64_t>(sizeof(float));
  }();
  return bytes;
}

}  // namespace

bool cross_entropy_rows_staged(std::int64_t cols, DType dtype, LossRows rows) {
  const std::int64_t row_bytes = cols * static_cast<std::int64_t>(dtype_size(dtype));
  const std::int64_t staged_bytes = (row_bytes + 15) / 16 * 16;
  if (rows == LossRows::Streamed || staged_bytes > staged_row_capacity()) return false;
  return rows == LossRows::Staged || row_bytes >= kCrossEntropyStagedMinRowBytes;
}

void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                         const float* scale_on_device, LossRows rows, cudaStream_t stream) {
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
    if (wide && cross_entropy_rows_staged(logits.cols, logits.dtype, rows)) {
      constexpr auto kernel = cross_entropy_staged_kernel<T, kMaxVec<T>>;
      allow_smem<kernel>(static_cast<std::size_t>(staged_row_capacity()));
      const std::size_t bytes = static_cast<std::size_t>((logits.cols * sizeof(T) + 15) / 16 * 16);
      launch_kernel(kernel, static_cast<unsigned>(logits.rows), kStagedThreads, bytes, stream,
                    losses.ptr<float>(), losses.ld, logits.ptr<T>(), logits.ld, targets,
                    logits.cols, scale_on_device);
      CUDA_CHECK_LAUNCH();
      return;
    }
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
