// Rotary position embedding with interleaved pairs, in place. Row r is
// position p = r % seq; inside every head block of head_dim columns the pair
// (2i, 2i+1) turns by p * theta^(-2i/hd). The backward pass is the inverse
// rotation (the transpose of an orthogonal map), so one routine serves both
// with the sign of the angle as the direction. Angles, cosines and sines are
// computed in double.
#include <cmath>
#include <vector>

#include "cpu/cpu_common.h"
#include "ops/rope/cpu_rope.h"

namespace tinyllama::cpu {
namespace {

template <typename T>
void rope_impl(Mat x, int seq, int head_dim, double theta, int direction) {
  const int pairs = head_dim / 2;
  const double work = 4.0 * static_cast<double>(x.cols) + 60.0 * pairs;
  parallel_for(x.rows, work, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<double> cos_t(static_cast<std::size_t>(pairs));
    std::vector<double> sin_t(static_cast<std::size_t>(pairs));
    for (std::int64_t r = r0; r < r1; ++r) {
      const double p = static_cast<double>(r % seq);
      for (int i = 0; i < pairs; ++i) {
        const double angle =
            direction * p * std::pow(theta, -2.0 * i / static_cast<double>(head_dim));
        cos_t[i] = std::cos(angle);
        sin_t[i] = std::sin(angle);
      }
      T* xr = row<T>(x, r);
      for (std::int64_t h0 = 0; h0 < x.cols; h0 += head_dim) {
        for (int i = 0; i < pairs; ++i) {
          const double a = xr[h0 + 2 * i];
          const double b = xr[h0 + 2 * i + 1];
          xr[h0 + 2 * i] = static_cast<T>(a * cos_t[i] - b * sin_t[i]);
          xr[h0 + 2 * i + 1] = static_cast<T>(a * sin_t[i] + b * cos_t[i]);
        }
      }
    }
  });
}

}  // namespace

void rope(Mat x, int seq, int head_dim, double theta, int direction) {
  const std::string op = direction > 0 ? "rope_forward" : "rope_backward";
  require(head_dim > 0 && head_dim % 2 == 0, op,
          "head_dim " + std::to_string(head_dim) + " must be positive and even");
  require(seq > 0, op, "seq " + std::to_string(seq) + " must be positive");
  require(theta > 0, op, "theta must be positive");
  require_shape(x, x.rows, x.cols, op, "x");
  require(x.cols % head_dim == 0, op,
          "width " + std::to_string(x.cols) + " is not a multiple of head_dim " +
              std::to_string(head_dim));
  require(x.rows % seq == 0, op,
          "rows " + std::to_string(x.rows) + " is not a multiple of seq " + std::to_string(seq));
  dispatch(x.dtype, op, [&](auto t) {
    rope_impl<decltype(t)>(x, seq, head_dim, theta, direction > 0 ? 1 : -1);
  });
}

}  // namespace tinyllama::cpu
