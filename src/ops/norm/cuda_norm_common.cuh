#pragma once
// What the RMSNorm kernels share (cuda_rmsnorm.cu, cuda_residual_norm.cu):
// the dtype pair dispatch and the vector width of a row view with its weight.
#include <initializer_list>

#include "device/cuda_common.cuh"
#include "device/cuda_vec.cuh"

namespace tinyllama::cuda {

// Warps per block of the row-per-warp norm kernels.
constexpr int kNormWarpsPerBlock = 8;

// Calls fn(TypeTag<T>, TypeTag<W>) for the activation and weight dtypes.
template <typename Fn>
void dispatch_pair(DType act, DType weight, const char* name, Fn&& fn) {
  dispatch_float(act, name,
                 [&](auto t) { dispatch_float(weight, name, [&](auto w) { fn(t, w); }); });
}

// Vector width for rows of T with weights of W: every row view and the
// weight must allow it.
template <typename T, typename W>
int row_vec(std::initializer_list<const Mat*> rows, const Mat& weight) {
  const int vec = vec_width<T>(rows);
  return aligned_for<W>(weight.data, vec) ? vec : 1;
}

}  // namespace tinyllama::cuda
