#pragma once
// Shared by the kernel files: element types and their fp32 conversions, the
// host-side dtype dispatch, block reductions and launch arithmetic. Kernels
// are templated on the storage type and do their arithmetic in fp32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "core/errors.h"
#include "core/mat.h"
#include "device/cuda_check.h"

namespace tinyllama::cuda {

// ---- element types -----------------------------------------------------------

__device__ __forceinline__ float to_f32(float x) {
  return x;
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float to_f32(__half x) {
  return __half2float(x);
}
// An fp32 element read as its value rounded to bf16: an fp32 master weight
// standing in for the bf16 copy it would have (ops/linear/cuda_fp8_cast.h,
// Fp8Source::Bf16OfF32). Read-only: there is no from_f32 for it.
struct F32AsBf16 {
  float v;
};
__device__ __forceinline__ float to_f32(F32AsBf16 x) {
  return __bfloat162float(__float2bfloat16_rn(x.v));
}

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) with the storage type of dtype. The GPU backend keeps
// fp32, bf16 and fp16; fp64 is the CPU reference's gradient-check precision.
template <typename Fn>
void dispatch_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::F32:
      fn(TypeTag<float>{});
      return;
    case DType::BF16:
      fn(TypeTag<__nv_bfloat16>{});
      return;
    case DType::F16:
      fn(TypeTag<__half>{});
      return;
    case DType::F64:
      break;
  }
  throw RuntimeFailure(std::string(op) + ": dtype " + std::string(dtype_name(dtype)) +
                       " is not supported on CUDA (float32, bfloat16 or float16)");
}

// ---- argument checks (host) ----------------------------------------------------

inline void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw RuntimeFailure(std::string(op) + ": " + what);
}

// Built by appending: GCC 12 reports a bogus -Wrestrict overlap (bug 105329)
// for "[" + std::string&& at -O3, and the CUDA host flags treat it as an error.
inline std::string shape_str(const Mat& m) {
  std::string s("[");
  s += std::to_string(m.rows);
  s += ", ";
  s += std::to_string(m.cols);
  s += "] ";
  s += dtype_name(m.dtype);
  return s;
}

inline void require_same_shape(const char* op, const Mat& a, const Mat& b) {
  require(a.rows == b.rows && a.cols == b.cols, op,
          "shape mismatch " + shape_str(a) + " vs " + shape_str(b));
}

inline void require_dtype(const char* op, const Mat& m, DType t) {
  require(m.dtype == t, op,
          "expected " + std::string(dtype_name(t)) + ", got " + std::string(dtype_name(m.dtype)));
}

// ---- launch arithmetic -------------------------------------------------------------

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items: enough to fill the GPU, capped
// so huge tensors loop instead of launching millions of blocks.
inline unsigned grid_for(std::int64_t n, int threads = kThreads) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  const std::int64_t cap = 65535;
  return static_cast<unsigned>(blocks < cap ? (blocks > 0 ? blocks : 1) : cap);
}

// ---- reductions ---------------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block, returned to every thread. Every thread of the block
// must call it (it synchronises); blockDim.x is a multiple of 32.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // the previous call's readers are done with partial
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  float total = 0.f;
  for (int w = 0; w < warps; ++w) total += partial[w];  // fixed order: deterministic
  return total;
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  float m = -INFINITY;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, partial[w]);
  return m;
}

}  // namespace tinyllama::cuda
