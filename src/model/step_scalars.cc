#include "model/step_scalars.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "model/backend.h"

namespace tinyllama {

StepScalars make_step_scalars(const AdamWHyper& hp, float loss_scale, std::int64_t tokens) {
  if (hp.step < 1) {
    throw std::invalid_argument("step scalars: AdamW step " + std::to_string(hp.step) +
                                " must be >= 1 (1-based)");
  }
  if (!(hp.grad_scale > 0.0f) || !(loss_scale > 0.0f)) {
    throw std::invalid_argument("step scalars: grad_scale and loss_scale must be positive");
  }
  if (tokens < 1) throw std::invalid_argument("step scalars: tokens must be at least 1");

  // The same expressions, in the same precision, that the AdamW and
  // cross-entropy launchers evaluated per call before the values moved to
  // device memory: float inputs widened to double, rounded once at the end.
  const double lr = hp.lr;
  StepScalars s;
  s.lr = lr;
  s.grad_scale = hp.grad_scale;
  s.step = hp.step;
  s.ce_grad_scale = loss_scale / static_cast<float>(tokens);
  s.decay = 1.0 - lr * static_cast<double>(hp.weight_decay);
  s.step_size = lr / (1.0 - std::pow(static_cast<double>(hp.beta1), hp.step));
  s.bias2_sqrt = std::sqrt(1.0 - std::pow(static_cast<double>(hp.beta2), hp.step));
  s.unscale = 1.0 / static_cast<double>(hp.grad_scale);
  return s;
}

}  // namespace tinyllama
