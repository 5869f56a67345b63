// The matrix-vector product of a decode step at batch 1. Every weight
// element is used once per token, so the op is a stream over the weights:
// one warp per output row (a row is contiguous in the [out, in] layout),
// 16-byte loads, several in flight per lane, fp32 accumulation and one warp
// reduction per row. x (a few KB) is re-read by every warp from L1.
#include <string>
#include <type_traits>

#include "device/cuda_common.cuh"
#include "device/cuda_vec.cuh"
#include "ops/decode/cuda_decode.h"

namespace tinyllama::cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // one per warp
constexpr int kUnroll = 4;        // 16-byte loads in flight per lane and operand

template <typename T, typename O, int Vec>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    gemv_kernel(O* y, const T* x, const T* w, std::int64_t ld_w, const O* residual, int n, int k) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= n) return;
  const T* wr = w + row * ld_w;
  constexpr int kStep = 32 * Vec;
  float acc = 0.f;
  int c = lane * Vec;
  for (; c + (kUnroll - 1) * kStep < k; c += kUnroll * kStep) {
    float wv[kUnroll][Vec], xv[kUnroll][Vec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      load_f32<Vec>(wr + c + u * kStep, wv[u]);
      load_f32<Vec>(x + c + u * kStep, xv[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int e = 0; e < Vec; ++e) acc += wv[u][e] * xv[u][e];
    }
  }
  for (; c < k; c += kStep) {  // k is a multiple of Vec (the host checked)
    float wv[Vec], xv[Vec];
    load_f32<Vec>(wr + c, wv);
    load_f32<Vec>(x + c, xv);
#pragma unroll
    for (int e = 0; e < Vec; ++e) acc += wv[e] * xv[e];
  }
  acc = warp_sum(acc);
  if (lane == 0) {
    const float r = residual != nullptr ? to_f32(residual[row]) : 0.f;
    y[row] = from_f32<O>(acc + r);
  }
}

}  // namespace

void gemv(Mat y, Mat x, Mat w, Mat residual, cudaStream_t stream) {
  const char* op = "gemv";
  require(x.rows == 1 && y.rows == 1, op, "x " + shape_str(x) + " and y must be single rows");
  require(w.cols == x.cols && y.cols == w.rows, op,
          "shapes " + shape_str(y) + " = " + shape_str(x) + " * " + shape_str(w) + "^T differ");
  require(w.dtype == x.dtype, op, "x and w must share a dtype");
  require(y.dtype == x.dtype || y.dtype == DType::F32, op,
          "y must be x's dtype or float32, not " + std::string(dtype_name(y.dtype)));
  require(w.rows <= (std::int64_t{1} << 30) && w.cols <= (std::int64_t{1} << 30), op, "too large");
  if (!residual.empty()) {
    require_same_shape(op, residual, y);
    require_dtype(op, residual, y.dtype);
  }
  if (y.cols == 0) return;
  const auto n = static_cast<int>(w.rows), k = static_cast<int>(w.cols);
  const unsigned blocks = static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch_float(x.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // 16-byte loads need every row of w and x itself to start on 16 bytes.
    const int vec = vec_width<T>({&x, &w});
    auto launch = [&](auto out_tag, auto width) {
      using O = typename decltype(out_tag)::type;
      constexpr int kVec = decltype(width)::value;
      gemv_kernel<T, O, kVec><<<blocks, kRowsPerBlock * 32, 0, stream>>>(
          y.ptr<O>(), x.ptr<T>(), w.ptr<T>(), w.ld, residual.empty() ? nullptr : residual.ptr<O>(),
          n, k);
      CUDA_CHECK_LAUNCH();
    };
    auto with_output = [&](auto out_tag) {
      dispatch_vec<T>(vec, [&](auto width) { launch(out_tag, width); });
    };
    if (y.dtype == DType::F32) {
      with_output(TypeTag<float>{});
    } else {
      with_output(TypeTag<T>{});
    }
  });
}

}  // namespace tinyllama::cuda
