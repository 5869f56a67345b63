#include "model/tolerance.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tinyllama {

double compute_ulp(DType compute) {
  switch (compute) {
    case DType::BF16:
      return std::ldexp(1.0, -7);
    case DType::F16:
      return std::ldexp(1.0, -10);
    case DType::F64:
      return std::ldexp(1.0, -52);
    default:
      return std::ldexp(1.0, -23);
  }
}

double amp_limit(double baseline_error, DType compute) {
  return kAmpFactor * baseline_error + compute_ulp(compute);
}

double max_rel_error(const double* actual, const double* ref, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(actual[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(actual[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

double adamw_step_error(const double* actual, const double* ref, const double* before,
                        std::size_t n) {
  double excess = 0, update = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(actual[i])) return std::numeric_limits<double>::infinity();
    const float r = static_cast<float>(std::abs(ref[i]));
    const double ulp =
        static_cast<double>(std::nextafter(r, std::numeric_limits<float>::infinity()) - r);
    excess = std::max(excess, std::abs(actual[i] - ref[i]) - 2.0 * ulp);
    update = std::max(update, std::abs(ref[i] - before[i]));
  }
  if (update == 0) return excess > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  return excess / update;
}

std::string param_group(const std::string& slot_name) {
  const std::string prefix = "layers.";
  if (slot_name.rfind(prefix, 0) != 0) return slot_name;
  const std::size_t dot = slot_name.find('.', prefix.size());
  return dot == std::string::npos ? slot_name : slot_name.substr(dot + 1);
}

}  // namespace tinyllama
