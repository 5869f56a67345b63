// The debugging exercise's naive-swiglu fault (model/faults.h,
// docs/EXERCISES.md): out = x · wᵀ with one thread per output element, each
// reducing over x's columns from global memory -- no shared-memory tiles, no
// tensor cores, the weight rows read by neighbouring threads one row apart
// (uncoalesced). Correct and slow on purpose; never used outside --inject.
#include <algorithm>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "ops/linear/cuda_naive_linear.h"

namespace tinyllama::cuda {
namespace {

template <typename T>
__global__ void naive_linear_kernel(T* out, std::int64_t out_ld, const T* x, std::int64_t x_ld,
                                    const T* w, std::int64_t w_ld, std::int64_t rows,
                                    std::int64_t cols, std::int64_t inner) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float sum = 0.0f;
    for (std::int64_t k = 0; k < inner; ++k) {
      sum += to_f32(x[r * x_ld + k]) * to_f32(w[c * w_ld + k]);
    }
    out[r * out_ld + c] = from_f32<T>(sum);
  }
}

}  // namespace

void naive_linear(Mat out, Mat x, Mat w, cudaStream_t stream) {
  const char* name = "naive_linear";
  require(out.rows == x.rows && out.cols == w.rows && x.cols == w.cols, name,
          "shapes " + shape_str(out) + " = " + shape_str(x) + " · " + shape_str(w) + "ᵀ");
  require(out.dtype == x.dtype && x.dtype == w.dtype, name, "operands must share one dtype");
  if (out.numel() == 0) return;
  dispatch_float(out.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kThreads = 128;
    const dim3 grid(static_cast<unsigned>((out.cols + kThreads - 1) / kThreads),
                    static_cast<unsigned>(std::min<std::int64_t>(out.rows, 65535)));
    launch_kernel(naive_linear_kernel<T>, grid, kThreads, 0, stream, out.ptr<T>(), out.ld,
                  x.ptr<const T>(), x.ld, w.ptr<const T>(), w.ld, out.rows, out.cols, x.cols);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tinyllama::cuda
