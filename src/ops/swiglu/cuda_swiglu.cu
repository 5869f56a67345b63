// SiLU and the fused SwiGLU on 2-D views with row strides (the unfused
// levels' silu -> mul and the fused levels' one kernel each way).
// Arithmetic in fp32, one rounding on the store.
#include "ops/elementwise/cuda_elementwise_kernel.cuh"
#include "ops/swiglu/cuda_swiglu.h"
#include "ops/swiglu/swiglu_math.cuh"

namespace tinyllama::cuda {
namespace {

using elementwise::launch_binary;
using elementwise::View;
using elementwise::view;

struct SiluBackwardOp {  // (dout, x) -> dx
  __device__ float operator()(float dout, float x) const {
    const float s = sigmoid(x);
    return dout * s * (1.f + x * (1.f - s));
  }
};
struct SwigluForwardOp {  // (gate, up) -> silu(gate) * up
  __device__ float operator()(float g, float u) const { return swiglu_value(g, u); }
};

template <typename T, int Vec>
__global__ void silu_kernel(View<T> out, View<const T> x, std::int64_t rows, std::int64_t chunks) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
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
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
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

}  // namespace

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
