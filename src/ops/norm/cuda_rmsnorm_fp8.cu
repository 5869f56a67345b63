// rmsnorm_apply that writes the FP8 codes of what it computes (issue 45;
// cuda_rmsnorm.h): each value as rmsnorm_apply_kernel computes it, rounded
// to the activation dtype as its store rounds it, then cast in the tiles of
// cuda_fp8_tile.cuh as fp8_cast_transpose casts the stored tensor -- the
// same codes and amax, bit for bit, without the bf16 round trip. The
// backward's recomputed norm is the weight gradient's input: its
// transposed codes are all the step reads of it.
#include "device/cuda_launch.cuh"
#include "ops/linear/cuda_fp8_tile.cuh"
#include "ops/norm/cuda_rmsnorm.h"

namespace tinyllama::cuda {
namespace {

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
