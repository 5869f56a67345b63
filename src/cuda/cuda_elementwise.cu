// Elementwise ops on 2-D views with row strides: residual adds, products and
// the SwiGLU pieces. Arithmetic in fp32, one rounding on the store.
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_vec.cuh"
#include "cuda/runtime/cuda_launch.cuh"
#include "cuda/swiglu_math.cuh"

namespace tinyllama::cuda {
namespace {

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

// Every elementwise op is a functor over fp32 values; one kernel walks the
// rows x cols index space, Vec elements per thread, and calls it. Outputs may
// alias inputs: each element is read before it is written, by the same thread.
struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct SiluBackwardOp {  // (dout, x) -> dx
  __device__ float operator()(float dout, float x) const {
    const float s = sigmoid(x);
    return dout * s * (1.f + x * (1.f - s));
  }
};
struct SwigluForwardOp {  // (gate, up) -> silu(gate) * up
  __device__ float operator()(float g, float u) const { return swiglu_value(g, u); }
};

template <typename T, int Vec, typename Op>
__global__ void binary_kernel(View<T> out, View<const T> a, View<const T> b, std::int64_t rows,
                              std::int64_t chunks, Op op) {
  pdl_wait_previous();  // first: PDL (cuda/runtime/cuda_launch.cuh)
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

template <typename T, int Vec>
__global__ void silu_kernel(View<T> out, View<const T> x, std::int64_t rows, std::int64_t chunks) {
  pdl_wait_previous();  // first: PDL (cuda/runtime/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t chunk = my_chunk();
  if (chunk >= chunks) return;
  const std::int64_t c = chunk * Vec;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    float v[Vec];
    load_f32<Vec>(&x.at(r, c), v);
#pragma unroll
    for (int k = 0; k < Vec; ++k) v[k] *= sigmoid(v[k]);
    store_f32<Vec>(&out.at(r, c), v);
  }
}

// h = silu(g) * u:  dg = dh * u * silu'(g),  du = dh * silu(g).
template <typename T, int Vec>
__global__ void swiglu_backward_kernel(View<T> dgate, View<T> dup, View<const T> dout,
                                       View<const T> gate, View<const T> up, std::int64_t rows,
                                       std::int64_t chunks) {
  pdl_wait_previous();  // first: PDL (cuda/runtime/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t chunk = my_chunk();
  if (chunk >= chunks) return;
  const std::int64_t c = chunk * Vec;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    float dh[Vec], g[Vec], u[Vec], dg[Vec], du[Vec];
    load_f32<Vec>(&dout.at(r, c), dh);
    load_f32<Vec>(&gate.at(r, c), g);
    load_f32<Vec>(&up.at(r, c), u);
#pragma unroll
    for (int k = 0; k < Vec; ++k) swiglu_grads(dh[k], g[k], u[k], dg[k], du[k]);
    store_f32<Vec>(&dgate.at(r, c), dg);
    store_f32<Vec>(&dup.at(r, c), du);
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

}  // namespace

void add(Mat out, Mat a, Mat b, cudaStream_t stream) {
  launch_binary("add", out, a, b, AddOp{}, stream);
}

void mul(Mat out, Mat a, Mat b, cudaStream_t stream) {
  launch_binary("mul", out, a, b, MulOp{}, stream);
}

void silu_forward(Mat out, Mat x, cudaStream_t stream) {
  require_same_shape("silu_forward", out, x);
  require(out.dtype == x.dtype, "silu_forward", "out and x must share one dtype");
  if (out.numel() == 0) return;
  dispatch_float(out.dtype, "silu_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_vec<T>(vec_width<T>({&out, &x}), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const RowLaunch l = row_launch(out.rows, out.cols / kVec);
      launch_kernel(silu_kernel<T, kVec>, l.grid, l.block, 0, stream, view<T>(out),
                    view<const T>(x), out.rows, out.cols / kVec);
      CUDA_CHECK_LAUNCH();
    });
  });
}

void silu_backward(Mat dx, Mat dout, Mat x, cudaStream_t stream) {
  launch_binary("silu_backward", dx, dout, x, SiluBackwardOp{}, stream);
}

void swiglu_forward(Mat out, Mat gate, Mat up, cudaStream_t stream) {
  launch_binary("swiglu_forward", out, gate, up, SwigluForwardOp{}, stream);
}

void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up, cudaStream_t stream) {
  const char* name = "swiglu_backward";
  for (const Mat* m : {&dup, &dout, &gate, &up}) require_same_shape(name, dgate, *m);
  for (const Mat* m : {&dup, &dout, &gate, &up}) {
    require(m->dtype == dgate.dtype, name, "operands must share one dtype");
  }
  if (dgate.numel() == 0) return;
  dispatch_float(dgate.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_vec<T>(vec_width<T>({&dgate, &dup, &dout, &gate, &up}), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const RowLaunch l = row_launch(dgate.rows, dgate.cols / kVec);
      launch_kernel(swiglu_backward_kernel<T, kVec>, l.grid, l.block, 0, stream, view<T>(dgate),
                    view<T>(dup), view<const T>(dout), view<const T>(gate), view<const T>(up),
                    dgate.rows, dgate.cols / kVec);
      CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tinyllama::cuda
