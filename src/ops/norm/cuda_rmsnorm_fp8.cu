// The RMSNorms that write the FP8 codes of what they compute (issue 45;
// cuda_rmsnorm.h): each value as rmsnorm_forward_kernel
// (rmsnorm_apply_kernel) computes it, rounded to the activation dtype as
// its store rounds it, then cast as the cast kernels cast the stored tensor
// -- the same codes and amax, bit for bit, without the bf16 round trip.
// The forward's norm is the next GEMM's input: one warp a row, as the
// plain kernel, writing the row-major codes. The backward's recomputed norm
// is the weight gradient's input: 64 x 64 tiles (cuda_fp8_tile.cuh), its
// transposed codes all the step reads of it.
#include <algorithm>

#include "device/cuda_launch.cuh"
#include "ops/linear/cuda_fp8_tile.cuh"
#include "ops/norm/cuda_norm_common.cuh"
#include "ops/norm/cuda_rmsnorm.h"

namespace tinyllama::cuda {
namespace {

// rmsnorm_forward_kernel's rows, with codes = the cast of each value
// (out written too when it is not null); every thread reaches raise_amax.
template <typename T, int Vec>
__global__ void rmsnorm_forward_fp8_kernel(T* out, std::int64_t ld_out, float* __restrict__ rstd,
                                           std::int64_t ld_rstd, const T* __restrict__ x,
                                           std::int64_t ld_x, const T* __restrict__ w,
                                           std::int64_t rows, std::int64_t dim, float eps,
                                           Fp8TileOut o) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  const std::int64_t chunks = dim / Vec;
  const float s = *o.scale;
  unsigned m = 0;
  for (std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
       r < rows; r += warps) {
    const T* xr = x + r * ld_x;
    float ss = 0.f;
    for (std::int64_t ch = lane; ch < chunks; ch += 32) {
      float v[Vec];
      load_f32<Vec>(xr + ch * Vec, v);
#pragma unroll
      for (int k = 0; k < Vec; ++k) ss += v[k] * v[k];
    }
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(dim) + eps);
    for (std::int64_t ch = lane; ch < chunks; ch += 32) {
      float v[Vec], wv[Vec];
      load_f32<Vec>(xr + ch * Vec, v);
      load_f32<Vec>(w + ch * Vec, wv);
      std::uint8_t c[Vec];
#pragma unroll
      for (int k = 0; k < Vec; ++k) {
        v[k] = through<T>(v[k] * inv * wv[k]);
        c[k] = fp8_code(__fmul_rn(v[k], s), o.kind);
        m = max(m, abs_bits(v[k]));
      }
      if (out != nullptr) store_f32<Vec>(out + r * ld_out + ch * Vec, v);
      store_codes<Vec>(o.out + r * o.ld + ch * Vec, c);
    }
    if (lane == 0) rstd[r * ld_rstd] = inv;
  }
  raise_amax(m, o.amax_bits);
}

// One 64 x 64 tile per block; out written too when it is not null.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    rmsnorm_apply_fp8_kernel(T* out, std::int64_t ld_out, const float* __restrict__ rstd,
                             std::int64_t ld_rstd, const T* __restrict__ x, std::int64_t ld_x,
                             const T* __restrict__ w, Fp8TileOut o) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  constexpr int kVec = kMaxVec<T>;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kCastTile;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kCastTile;
  const auto produce = [&](int i, int col, float(&v)[1][kVec]) {
    const std::int64_t r = r0 + i;
    const std::int64_t c = c0 + col;
    const float inv = rstd[r * ld_rstd];
    float wv[kVec];
    load_f32<kVec>(x + r * ld_x + c, v[0]);
    load_f32<kVec>(w + c, wv);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[0][k] = through<T>(v[0][k] * inv * wv[k]);
    if (out != nullptr) store_f32<kVec>(out + r * ld_out + c, v[0]);
  };
  cast_tiles<kVec, 1>(produce, r0, c0, 0, o);
}

}  // namespace

bool try_rmsnorm_forward_fp8(Mat out, bool keep_out, Mat rstd, Mat x, Mat weight, double eps,
                             const float* scale, Fp8Format f, Fp8View codes, float* amax,
                             cudaStream_t stream) {
  const char* name = "rmsnorm_forward_fp8";
  require_same_shape(name, out, x);
  require(weight.numel() == x.cols && (weight.rows == 1 || weight.contiguous()), name,
          "weight " + shape_str(weight) + " for rows of " + std::to_string(x.cols));
  require(rstd.rows == x.rows && rstd.cols == 1 && rstd.dtype == DType::F32, name,
          "rstd must be float32 [rows, 1]");
  require(scale != nullptr && codes.codes != nullptr, name, "no scale or no FP8 output");
  using T = __nv_bfloat16;
  constexpr int kVec = kMaxVec<T>;
  const bool bf16 = x.dtype == DType::BF16 && out.dtype == x.dtype && weight.dtype == x.dtype;
  if (!bf16 || row_vec<T, T>({&out, &x}, weight) != kVec ||
      !tile_store_aligned(codes.codes, codes.ld, kVec)) {
    return false;
  }
  if (x.numel() == 0) return true;
  const std::int64_t blocks =
      std::min<std::int64_t>((x.rows + kNormWarpsPerBlock - 1) / kNormWarpsPerBlock, 65535);
  const Fp8TileOut o{scale,
                     fp8_interpretation(f),
                     codes.codes,
                     codes.ld,
                     nullptr,
                     0,
                     reinterpret_cast<unsigned*>(amax)};
  launch_kernel(rmsnorm_forward_fp8_kernel<T, kVec>, static_cast<unsigned>(blocks),
                kNormWarpsPerBlock * 32, 0, stream, keep_out ? out.ptr<T>() : nullptr, out.ld,
                rstd.ptr<float>(), rstd.ld, x.ptr<const T>(), x.ld, weight.ptr<const T>(), x.rows,
                x.cols, static_cast<float>(eps), o);
  CUDA_CHECK_LAUNCH();
  return true;
}

bool try_rmsnorm_apply_fp8(Mat out, bool keep_out, Mat x, Mat weight, Mat rstd, const float* scale,
                           Fp8Format f, Fp8View codes, Fp8View codes_t, float* amax,
                           cudaStream_t stream) {
  const char* name = "rmsnorm_apply_fp8";
  require_same_shape(name, out, x);
  require(weight.numel() == x.cols && (weight.rows == 1 || weight.contiguous()), name,
          "weight " + shape_str(weight) + " for rows of " + std::to_string(x.cols));
  require(rstd.rows == x.rows && rstd.cols == 1 && rstd.dtype == DType::F32, name,
          "rstd must be float32 [rows, 1]");
  require(scale != nullptr && (codes.codes != nullptr || codes_t.codes != nullptr), name,
          "no scale or no FP8 output");
  using T = __nv_bfloat16;
  const bool bf16 = x.dtype == DType::BF16 && out.dtype == x.dtype && weight.dtype == x.dtype;
  if (!bf16 || x.rows % kCastTile != 0 || x.cols % kCastTile != 0 || x.rows / kCastTile > 65535 ||
      vec_width<T>({&out, &x}) != kMaxVec<T> || !aligned_for<T>(weight.data, kMaxVec<T>) ||
      !tile_store_aligned(codes.codes, codes.ld, kMaxVec<T>) ||
      !tile_store_aligned(codes_t.codes, codes_t.ld, kGather)) {
    return false;
  }
  if (x.numel() == 0) return true;
  const dim3 grid(static_cast<unsigned>(x.cols / kCastTile),
                  static_cast<unsigned>(x.rows / kCastTile));
  const Fp8TileOut o{scale,
                     fp8_interpretation(f),
                     codes.codes,
                     codes.ld,
                     codes_t.codes,
                     codes_t.ld,
                     reinterpret_cast<unsigned*>(amax)};
  launch_kernel(rmsnorm_apply_fp8_kernel<T>, grid, dim3(kTileThreads), 0, stream,
                keep_out ? out.ptr<T>() : nullptr, out.ld, rstd.ptr<const float>(), rstd.ld,
                x.ptr<const T>(), x.ld, weight.ptr<const T>(), o);
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace tinyllama::cuda
