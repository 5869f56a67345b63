// NormImpl::Fused, forward: sum = a + b written to the residual stream and
// out = RMSNorm(sum), one warp per row, in one pass over the row. The sum is
// rounded to the activation dtype before it is squared and normalised, so
// the result is the unfused add-then-norm's (which reads the stored sum) and
// backward, which reads the stored sum too, sees the same statistic.
//
// Rows of up to 32 * 8 vectors (D 2048 in bf16, 1024 in fp32) keep the sum in
// registers between the two halves; longer rows reread the sum they stored
// (the lane's own writes, so no barrier is needed).
#include <algorithm>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_vec.cuh"
#include "ops/norm/cuda_norm_common.cuh"
#include "ops/norm/cuda_rmsnorm.h"

namespace tinyllama::cuda {
namespace {

// Rounds each value to T and back, as storing and rereading it would.
template <typename T, int Vec>
__device__ __forceinline__ void round_to(float (&v)[Vec]) {
#pragma unroll
  for (int k = 0; k < Vec; ++k) v[k] = to_f32(from_f32<T>(v[k]));
}

// sum and a or b may alias (no __restrict__): each element is read by the
// lane that writes it, before the write. Chunks = 0: the reread path.
template <typename T, typename W, int Vec, int Chunks>
__global__ void add_rmsnorm_forward_kernel(T* sum, std::int64_t ld_sum, T* __restrict__ out,
                                           std::int64_t ld_out, float* __restrict__ rstd,
                                           std::int64_t ld_rstd, const T* a, std::int64_t ld_a,
                                           const T* b, std::int64_t ld_b, const W* __restrict__ w,
                                           std::int64_t rows, std::int64_t dim, float eps) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  constexpr int kRegs = Chunks > 0 ? Chunks : 1;
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  const std::int64_t chunks = dim / Vec;
  for (std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
       r < rows; r += warps) {
    const T* ar = a + r * ld_a;
    const T* br = b + r * ld_b;
    T* sr = sum + r * ld_sum;
    float kept[kRegs][Vec];
    float ss = 0.f;
    // First half: the sum, stored and squared.
    auto add_chunk = [&](std::int64_t ch, float(&v)[Vec]) {
      float bv[Vec];
      load_f32<Vec>(ar + ch * Vec, v);
      load_f32<Vec>(br + ch * Vec, bv);
#pragma unroll
      for (int k = 0; k < Vec; ++k) v[k] += bv[k];
      round_to<T, Vec>(v);
      store_f32<Vec>(sr + ch * Vec, v);
#pragma unroll
      for (int k = 0; k < Vec; ++k) ss += v[k] * v[k];
    };
    if constexpr (Chunks > 0) {
#pragma unroll
      for (int c = 0; c < Chunks; ++c) {
        const std::int64_t ch = lane + 32 * c;
        if (ch < chunks) add_chunk(ch, kept[c]);
      }
    } else {
      for (std::int64_t ch = lane; ch < chunks; ch += 32) add_chunk(ch, kept[0]);
    }
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(dim) + eps);
    // Second half: the norm of the stored sum.
    T* yr = out + r * ld_out;
    auto norm_chunk = [&](std::int64_t ch, float(&v)[Vec]) {
      float wv[Vec];
      load_f32<Vec>(w + ch * Vec, wv);
#pragma unroll
      for (int k = 0; k < Vec; ++k) v[k] = v[k] * inv * wv[k];
      store_f32<Vec>(yr + ch * Vec, v);
    };
    if constexpr (Chunks > 0) {
#pragma unroll
      for (int c = 0; c < Chunks; ++c) {
        const std::int64_t ch = lane + 32 * c;
        if (ch < chunks) norm_chunk(ch, kept[c]);
      }
    } else {
      for (std::int64_t ch = lane; ch < chunks; ch += 32) {
        float v[Vec];
        load_f32<Vec>(sr + ch * Vec, v);
        norm_chunk(ch, v);
      }
    }
    if (lane == 0) rstd[r * ld_rstd] = inv;
  }
}

}  // namespace

void add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight, double eps,
                         cudaStream_t stream) {
  const char* name = "add_rmsnorm_forward";
  require_same_shape(name, sum, a);
  require_same_shape(name, b, a);
  require_same_shape(name, out, a);
  require(sum.dtype == a.dtype && b.dtype == a.dtype && out.dtype == a.dtype, name,
          "sum, out, a and b must share one dtype");
  require(weight.numel() == a.cols && (weight.rows == 1 || weight.contiguous()), name,
          "weight " + shape_str(weight) + " for rows of " + std::to_string(a.cols));
  require(rstd.rows == a.rows && rstd.cols == 1, name, "rstd must be [rows, 1]");
  require_dtype(name, rstd, DType::F32);
  if (a.numel() == 0) return;
  dispatch_pair(a.dtype, weight.dtype, name, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    dispatch_vec<T>(row_vec<T, W>({&sum, &out, &a, &b}, weight), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const std::int64_t blocks =
          std::min<std::int64_t>((a.rows + kNormWarpsPerBlock - 1) / kNormWarpsPerBlock, 65535);
      const std::int64_t per_lane = (a.cols / kVec + 31) / 32;
      auto launch = [&](auto kernel) {
        launch_kernel(kernel, static_cast<unsigned>(blocks), kNormWarpsPerBlock * 32, 0, stream,
                      sum.ptr<T>(), sum.ld, out.ptr<T>(), out.ld, rstd.ptr<float>(), rstd.ld,
                      a.ptr<const T>(), a.ld, b.ptr<const T>(), b.ld, weight.ptr<const W>(), a.rows,
                      a.cols, static_cast<float>(eps));
      };
      if (a.cols % kVec != 0 || per_lane > 8) {
        launch(add_rmsnorm_forward_kernel<T, W, kVec, 0>);
      } else if (per_lane == 1) {
        launch(add_rmsnorm_forward_kernel<T, W, kVec, 1>);
      } else if (per_lane == 2) {
        launch(add_rmsnorm_forward_kernel<T, W, kVec, 2>);
      } else if (per_lane <= 4) {
        launch(add_rmsnorm_forward_kernel<T, W, kVec, 4>);
      } else {
        launch(add_rmsnorm_forward_kernel<T, W, kVec, 8>);
      }
      CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tinyllama::cuda
