// AdamW with PyTorch's semantics (torch.optim.AdamW, bias-corrected,
// decoupled weight decay applied before the moment update):
//   p -= lr * wd * p
//   m  = b1 m + (1 - b1) g
//   v  = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Each element is computed in double and rounded once per stored value.
#include <cmath>

#include "cpu/cpu_common.h"
#include "ops/optimizer/cpu_adamw.h"

namespace tinyllama::cpu {
namespace {

template <typename T>
void adamw_impl(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp, double clip) {
  if (hp.skip_flag != nullptr && *hp.skip_flag != 0) return;  // overflow: GradScaler skips the step
  const double unscale = clip / hp.grad_scale;
  const double lr = hp.lr, b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps;
  const double wd = hp.apply_decay ? hp.weight_decay : 0.0;
  const double step_size = lr / (1.0 - std::pow(b1, hp.step));
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(b2, hp.step));
  parallel_elements(param.rows, param.cols, 30.0,
                    [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
                      for (std::int64_t r = r0; r < r1; ++r) {
                        T* pr = row<T>(param, r);
                        const T* gr = row<T>(grad, r);
                        T* mr = row<T>(m, r);
                        T* vr = row<T>(v, r);
                        for (std::int64_t c = c0; c < c1; ++c) {
                          const double g = static_cast<double>(gr[c]) * unscale;
                          const double p =
                              static_cast<double>(pr[c]) - lr * wd * static_cast<double>(pr[c]);
                          const double m_new = b1 * static_cast<double>(mr[c]) + (1.0 - b1) * g;
                          const double v_new = b2 * static_cast<double>(vr[c]) + (1.0 - b2) * g * g;
                          const double denom = std::sqrt(v_new) / bias2_sqrt + eps;
                          mr[c] = static_cast<T>(m_new);
                          vr[c] = static_cast<T>(v_new);
                          pr[c] = static_cast<T>(p - step_size * m_new / denom);
                        }
                      }
                    });
}

}  // namespace

void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp, double clip) {
  const std::string op = "adamw";
  require(hp.step >= 1, op, "step " + std::to_string(hp.step) + " must be >= 1 (1-based)");
  require(hp.grad_scale > 0, op, "grad_scale must be positive");
  require_shape(param, param.rows, param.cols, op, "param");
  require_shape(grad, param.rows, param.cols, op, "grad");
  require_shape(m, param.rows, param.cols, op, "m");
  require_shape(v, param.rows, param.cols, op, "v");
  dispatch(common_dtype(op, {param, grad, m, v}), op,
           [&](auto t) { adamw_impl<decltype(t)>(param, grad, m, v, hp, clip); });
}

void flag_nonfinite(Mat x, std::int32_t* flag) {
  const std::string op = "flag_nonfinite";
  require(flag != nullptr, op, "flag pointer is null");
  dispatch(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    for (std::int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<T>(x, r);
      for (std::int64_t c = 0; c < x.cols; ++c) {
        if (!std::isfinite(xr[c])) {
          *flag = 1;
          return;
        }
      }
    }
  });
}

}  // namespace tinyllama::cpu
