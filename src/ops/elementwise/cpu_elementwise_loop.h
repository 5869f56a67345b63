#pragma once
// The loop the CPU's elementwise references share (ops/elementwise and
// ops/swiglu): every element of same-shaped views, on parallel_elements'
// threads, each through one scalar function computed in double with one
// rounding to T, so that a fused op and its unfused composition agree bit
// for bit.
#include <initializer_list>
#include <string>

#include "cpu/cpu_common.h"

namespace tinyllama::cpu {

template <typename T>
inline T mul_scalar(T a, T b) {
  return static_cast<T>(static_cast<double>(a) * static_cast<double>(b));
}

// Applies f(elements...) over every element of same-shaped Mats, on
// parallel_elements' threads; flops: a rough cost of one f, which decides
// whether threads pay off.
template <typename T, typename F, typename... M>
inline void for_each_element(const Mat& shape, double flops, F&& f, const M&... mats) {
  parallel_elements(shape.rows, shape.cols, flops,
                    [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
                      for (std::int64_t r = r0; r < r1; ++r) {
                        for (std::int64_t c = c0; c < c1; ++c) f(row<T>(mats, r)[c]...);
                      }
                    });
}

// Rough cost of one arithmetic element, for for_each_element.
constexpr double kArith = 1;

inline void check_same_shape(const std::string& op, const Mat& ref,
                             std::initializer_list<Mat> mats) {
  const char* names = "abcdefgh";
  int i = 0;
  for (const Mat& m : mats) {
    const char name[2] = {names[i++], 0};
    require_shape(m, ref.rows, ref.cols, op, name);
  }
}

}  // namespace tinyllama::cpu
