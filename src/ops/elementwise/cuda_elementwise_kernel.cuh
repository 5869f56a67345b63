#pragma once
// The elementwise kernels' common form, shared by ops/elementwise and
// ops/swiglu: 2-D views with row strides, and one kernel that walks the
// rows x cols index space, Vec elements per thread, applying a functor over
// fp32 values (one rounding on the store).
#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_vec.cuh"

namespace tinyllama::cuda::elementwise {

// A view as the kernels see it: base pointer and row stride.
template <typename T>
struct View {
  T* p;
  std::int64_t ld;
  __device__ T& at(std::int64_t r, std::int64_t c) const { return p[r * ld + c]; }
};

template <typename T>
View<T> view(const Mat& m) {
  return View<T>{m.ptr<T>(), m.ld};
}

// Each op is a functor over fp32 values; one kernel walks the
// rows x cols index space, Vec elements per thread, and calls it. Outputs may
// alias inputs: each element is read before it is written, by the same thread.
template <typename T, int Vec, typename Op>
__global__ void binary_kernel(View<T> out, View<const T> a, View<const T> b, std::int64_t rows,
                              std::int64_t chunks, Op op) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t chunk = my_chunk();
  if (chunk >= chunks) return;
  const std::int64_t c = chunk * Vec;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    float x[Vec], y[Vec];
    load_f32<Vec>(&a.at(r, c), x);
    load_f32<Vec>(&b.at(r, c), y);
#pragma unroll
    for (int k = 0; k < Vec; ++k) x[k] = op(x[k], y[k]);
    store_f32<Vec>(&out.at(r, c), x);
  }
}

template <typename Op>
void launch_binary(const char* name, Mat out, Mat a, Mat b, Op op, cudaStream_t stream) {
  require_same_shape(name, out, a);
  require_same_shape(name, out, b);
  require(out.dtype == a.dtype && out.dtype == b.dtype, name,
          "operands must share one dtype: " + shape_str(out) + ", " + shape_str(a) + ", " +
              shape_str(b));
  if (out.numel() == 0) return;
  dispatch_float(out.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_vec<T>(vec_width<T>({&out, &a, &b}), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const RowLaunch l = row_launch(out.rows, out.cols / kVec);
      launch_kernel(binary_kernel<T, kVec, Op>, l.grid, l.block, 0, stream, view<T>(out),
                    view<const T>(a), view<const T>(b), out.rows, out.cols / kVec, op);
      CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tinyllama::cuda::elementwise
