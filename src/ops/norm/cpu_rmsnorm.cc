// RMSNorm, y = x / sqrt(mean(x^2) + eps) * w, and its gradient.
//
// With r = rstd of a row and g = dout:
//   dx_j = r * w_j * g_j - x_j * r^3 / D * sum_k g_k w_k x_k
//   dw_j = sum over rows of g_j * x_j * r
// Row sums and the dweight reduction over rows run in double in a fixed
// order. The forward pass normalises with the rstd as stored (rounded to the
// stats dtype), so forward and backward see the same statistic.
#include <cmath>
#include <vector>

#include "cpu/cpu_common.h"
#include "ops/norm/cpu_rmsnorm.h"

namespace tinyllama::cpu {
namespace {

// One row normalised with its rstd r: the forward pass and the recompute
// share it, so the two agree to the bit.
template <typename T>
void normalise_row(T* yr, const T* xr, T r, const T* w, std::int64_t d) {
  for (std::int64_t j = 0; j < d; ++j) {
    yr[j] = static_cast<T>(static_cast<double>(xr[j]) * r * static_cast<double>(w[j]));
  }
}

template <typename T>
void forward_impl(Mat out, Mat rstd, Mat x, Mat weight, double eps) {
  const std::int64_t d = x.cols;
  const T* w = row<T>(weight, 0);
  parallel_for(x.rows, 4.0 * static_cast<double>(d), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const T* xr = row<T>(x, i);
      double sum_sq = 0;
      for (std::int64_t j = 0; j < d; ++j) sum_sq += static_cast<double>(xr[j]) * xr[j];
      const T r = static_cast<T>(1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps));
      row<T>(rstd, i)[0] = r;
      normalise_row<T>(row<T>(out, i), xr, r, w, d);
    }
  });
}

template <typename T>
void apply_impl(Mat out, Mat x, Mat weight, Mat rstd) {
  const std::int64_t d = x.cols;
  const T* w = row<T>(weight, 0);
  parallel_for(x.rows, 2.0 * static_cast<double>(d), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      normalise_row<T>(row<T>(out, i), row<T>(x, i), row<T>(rstd, i)[0], w, d);
    }
  });
}

// dweight first, over column blocks (each column summed over the rows in
// order), while dout is intact: dx, written next row by row, may alias it.
template <typename T>
void backward_impl(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd, Mat dres) {
  const std::int64_t d = x.cols;
  const T* w = row<T>(weight, 0);
  const auto work = 3.0 * static_cast<double>(x.rows);
  parallel_for(d, work, [&](std::int64_t j0, std::int64_t j1) {
    std::vector<double> dw(static_cast<std::size_t>(j1 - j0), 0.0);
    for (std::int64_t i = 0; i < x.rows; ++i) {
      const T* xr = row<T>(x, i);
      const T* gr = row<T>(dout, i);
      const double r = row<T>(rstd, i)[0];
      for (std::int64_t j = j0; j < j1; ++j) {
        dw[j - j0] += static_cast<double>(gr[j]) * static_cast<double>(xr[j]) * r;
      }
    }
    T* dwr = row<T>(dweight, 0);
    for (std::int64_t j = j0; j < j1; ++j) dwr[j] = static_cast<T>(dw[j - j0]);
  });
  parallel_for(x.rows, 6.0 * static_cast<double>(d), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const T* xr = row<T>(x, i);
      const T* gr = row<T>(dout, i);
      const double r = row<T>(rstd, i)[0];
      double gwx = 0;
      for (std::int64_t j = 0; j < d; ++j) gwx += static_cast<double>(gr[j]) * w[j] * xr[j];
      const double coef = r * r * r * gwx / static_cast<double>(d);
      const T* rr = dres.empty() ? nullptr : row<T>(dres, i);
      T* dxr = row<T>(dx, i);
      for (std::int64_t j = 0; j < d; ++j) {
        // Read before dx[j] is written: dx may alias dout or dres.
        const double g = gr[j];
        const double res = rr != nullptr ? static_cast<double>(rr[j]) : 0.0;
        dxr[j] = static_cast<T>(r * static_cast<double>(w[j]) * g -
                                static_cast<double>(xr[j]) * coef + res);
      }
    }
  });
}

}  // namespace

void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) {
  const std::string op = "rmsnorm_forward";
  require_shape(x, x.rows, x.cols, op, "x");
  require_shape(out, x.rows, x.cols, op, "out");
  require_shape(rstd, x.rows, 1, op, "rstd");
  require_shape(weight, 1, x.cols, op, "weight");
  dispatch(common_dtype(op, {out, rstd, x, weight}), op,
           [&](auto t) { forward_impl<decltype(t)>(out, rstd, x, weight, eps); });
}

void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) {
  const std::string op = "rmsnorm_apply";
  require_shape(x, x.rows, x.cols, op, "x");
  require_shape(out, x.rows, x.cols, op, "out");
  require_shape(rstd, x.rows, 1, op, "rstd");
  require_shape(weight, 1, x.cols, op, "weight");
  dispatch(common_dtype(op, {out, rstd, x, weight}), op,
           [&](auto t) { apply_impl<decltype(t)>(out, x, weight, rstd); });
}

void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd, Mat dresidual) {
  const std::string op = dresidual.empty() ? "rmsnorm_backward" : "rmsnorm_backward_add";
  require_shape(x, x.rows, x.cols, op, "x");
  require_shape(dx, x.rows, x.cols, op, "dx");
  require_shape(dout, x.rows, x.cols, op, "dout");
  require_shape(dweight, 1, x.cols, op, "dweight");
  require_shape(weight, 1, x.cols, op, "weight");
  require_shape(rstd, x.rows, 1, op, "rstd");
  if (!dresidual.empty()) require_shape(dresidual, x.rows, x.cols, op, "dresidual");
  const Mat typed = dresidual.empty() ? dx : dresidual;  // the dtype check's stand-in when absent
  dispatch(common_dtype(op, {dx, dweight, dout, x, weight, rstd, typed}), op, [&](auto t) {
    backward_impl<decltype(t)>(dx, dweight, dout, x, weight, rstd, dresidual);
  });
}

}  // namespace tinyllama::cpu
