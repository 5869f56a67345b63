// Elementwise ops: the residual add and the product. Every op reads an
// element before writing it, so an output may alias any input.
#include "ops/elementwise/cpu_elementwise.h"
#include "ops/elementwise/cpu_elementwise_loop.h"

namespace tinyllama::cpu {
namespace {

template <typename T>
T add_scalar(T a, T b) {
  return static_cast<T>(static_cast<double>(a) + static_cast<double>(b));
}

}  // namespace

void add(Mat out, Mat a, Mat b) {
  check_same_shape("add", out, {out, a, b});
  dispatch(common_dtype("add", {out, a, b}), "add", [&](auto t) {
    using T = decltype(t);
    for_each_element<T>(
        out, kArith, [](T& o, T& x, T& y) { o = add_scalar(x, y); }, out, a, b);
  });
}

void mul(Mat out, Mat a, Mat b) {
  check_same_shape("mul", out, {out, a, b});
  dispatch(common_dtype("mul", {out, a, b}), "mul", [&](auto t) {
    using T = decltype(t);
    for_each_element<T>(
        out, kArith, [](T& o, T& x, T& y) { o = mul_scalar(x, y); }, out, a, b);
  });
}

}  // namespace tinyllama::cpu
