// The global gradient norm and clipping's coefficient, with
// torch.nn.utils.clip_grad_norm_'s semantics: clip = min(1, max_norm /
// (norm + 1e-6)). The reference sums in double, in element order.
#include <cmath>

#include "cpu/cpu_common.h"
#include "ops/optimizer/cpu_grad_norm.h"

namespace tinyllama::cpu {

void sum_squares(Mat x, double* acc) {
  const std::string op = "sum_squares";
  require(acc != nullptr, op, "accumulator pointer is null");
  dispatch(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    double sum = 0;
    for (std::int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<T>(x, r);
      for (std::int64_t c = 0; c < x.cols; ++c) {
        const double v = static_cast<double>(xr[c]);
        sum += v * v;
      }
    }
    acc[0] += sum;
  });
}

void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) {
  const std::string op = "clip_by_norm";
  require(acc != nullptr && step != nullptr && norm != nullptr, op, "null pointer");
  const double value = std::sqrt(acc[0]) * step->unscale;
  *norm = static_cast<float>(value);
  if (max_norm > 0) step->clip = std::fmin(1.0, max_norm / (value + 1e-6));
}

}  // namespace tinyllama::cpu
