// Per-row cross-entropy and its gradient. Each row's log-sum-exp is taken
// in double around the row maximum, so large logits cannot overflow. The
// backward pass finishes reading a row (for its lse) before writing it, which
// is what lets dlogits alias logits.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/cpu_common.h"
#include "ops/loss/cpu_cross_entropy.h"

namespace tinyllama::cpu {
namespace {

template <typename T>
double row_logsumexp(const T* x, std::int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(x[j]));
  double sum = 0;
  for (std::int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(x[j]) - m);
  return m + std::log(sum);
}

void check_targets(const std::string& op, const std::int32_t* targets, std::int64_t rows,
                   std::int64_t vocab) {
  require(targets != nullptr || rows == 0, op, "targets pointer is null");
  for (std::int64_t i = 0; i < rows; ++i) {
    require(targets[i] >= 0 && targets[i] < vocab, op,
            "target " + std::to_string(targets[i]) + " at row " + std::to_string(i) +
                " is outside [0, " + std::to_string(vocab) + ")");
  }
}

}  // namespace

void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) {
  const std::string op = "cross_entropy_forward";
  require_shape(logits, logits.rows, logits.cols, op, "logits");
  require_shape(losses, logits.rows, 1, op, "losses");
  check_targets(op, targets, logits.rows, logits.cols);
  dispatch(common_dtype(op, {losses, logits}), op, [&](auto t) {
    using T = decltype(t);
    parallel_for(logits.rows, 25.0 * static_cast<double>(logits.cols),
                 [&](std::int64_t i0, std::int64_t i1) {
                   for (std::int64_t i = i0; i < i1; ++i) {
                     const T* x = row<T>(logits, i);
                     row<T>(losses, i)[0] = static_cast<T>(row_logsumexp(x, logits.cols) -
                                                           static_cast<double>(x[targets[i]]));
                   }
                 });
  });
}

void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets, double scale) {
  const std::string op = "cross_entropy_backward";
  require_shape(logits, logits.rows, logits.cols, op, "logits");
  require_shape(dlogits, logits.rows, logits.cols, op, "dlogits");
  check_targets(op, targets, logits.rows, logits.cols);
  dispatch(common_dtype(op, {dlogits, logits}), op, [&](auto t) {
    using T = decltype(t);
    parallel_for(logits.rows, 50.0 * static_cast<double>(logits.cols),
                 [&](std::int64_t i0, std::int64_t i1) {
                   for (std::int64_t i = i0; i < i1; ++i) {
                     const T* x = row<T>(logits, i);
                     T* dx = row<T>(dlogits, i);
                     const double lse = row_logsumexp(x, logits.cols);
                     for (std::int64_t j = 0; j < logits.cols; ++j) {
                       const double p = std::exp(static_cast<double>(x[j]) - lse);
                       dx[j] = static_cast<T>((p - (j == targets[i] ? 1.0 : 0.0)) * scale);
                     }
                   }
                 });
  });
}

}  // namespace tinyllama::cpu
