// SiLU and the fused SwiGLU.
//
// The fused SwiGLU is written with the same scalar primitives, in the same
// order and with the same roundings to T, as the unfused composition
// silu -> mul (forward) and mul, mul -> silu_backward (backward), so the two
// paths of the model agree bit for bit on the CPU and each fused GPU kernel
// has an exact reference. Every op reads an element before writing it, so an
// output may alias any input.
#include <cmath>

#include "ops/elementwise/cpu_elementwise_loop.h"
#include "ops/swiglu/cpu_swiglu.h"

namespace tinyllama::cpu {
namespace {

// sigmoid without overflow: exp is only taken of a non-positive argument.
double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

template <typename T>
T silu_scalar(T x) {
  const double xd = x;
  return static_cast<T>(xd * sigmoid(xd));
}

// d silu / dx = s + x s (1 - s) with s = sigmoid(x).
template <typename T>
T silu_grad_scalar(T dout, T x) {
  const double xd = x;
  const double s = sigmoid(xd);
  return static_cast<T>(static_cast<double>(dout) * (s * (1.0 + xd * (1.0 - s))));
}

// Rough cost of one element (an exp counts ~20), for for_each_element.
constexpr double kSilu = 25;

}  // namespace

void silu_forward(Mat out, Mat x) {
  check_same_shape("silu_forward", out, {out, x});
  dispatch(common_dtype("silu_forward", {out, x}), "silu_forward", [&](auto t) {
    using T = decltype(t);
    for_each_element<T>(
        out, kSilu, [](T& o, T& xv) { o = silu_scalar(xv); }, out, x);
  });
}

void silu_backward(Mat dx, Mat dout, Mat x) {
  check_same_shape("silu_backward", dx, {dx, dout, x});
  dispatch(common_dtype("silu_backward", {dx, dout, x}), "silu_backward", [&](auto t) {
    using T = decltype(t);
    for_each_element<T>(
        dx, kSilu, [](T& d, T& g, T& xv) { d = silu_grad_scalar(g, xv); }, dx, dout, x);
  });
}

void swiglu_forward(Mat out, Mat gate, Mat up) {
  check_same_shape("swiglu_forward", out, {out, gate, up});
  dispatch(common_dtype("swiglu_forward", {out, gate, up}), "swiglu_forward", [&](auto t) {
    using T = decltype(t);
    for_each_element<T>(
        out, kSilu, [](T& o, T& g, T& u) { o = mul_scalar(silu_scalar(g), u); }, out, gate, up);
  });
}

void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) {
  check_same_shape("swiglu_backward", dgate, {dgate, dup, dout, gate, up});
  dispatch(common_dtype("swiglu_backward", {dgate, dup, dout, gate, up}), "swiglu_backward",
           [&](auto t) {
             using T = decltype(t);
             for_each_element<T>(
                 dgate, 2 * kSilu,
                 [](T& dg, T& du, T& g, T& gv, T& uv) {
                   // Read everything first: the outputs may alias the inputs.
                   const T d = g, gate_v = gv, up_v = uv;
                   du = mul_scalar(d, silu_scalar(gate_v));
                   dg = silu_grad_scalar(mul_scalar(d, up_v), gate_v);
                 },
                 dgate, dup, dout, gate, up);
           });
}

}  // namespace tinyllama::cpu
