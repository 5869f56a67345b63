#include "bench/roofline.h"

#include <algorithm>
#include <limits>

namespace tinyllama::bench {

Rates rates(std::int64_t flops, std::int64_t bytes, double time_us, const Roof& roof) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  Rates r;
  if (!(time_us > 0)) return Rates{kNaN, kNaN, kNaN, kNaN};
  const double seconds = time_us * 1e-6;
  r.gbs = static_cast<double>(bytes) / seconds / 1e9;
  r.tflops = static_cast<double>(flops) / seconds / 1e12;
  if (!roof.known()) {
    r.roof_us = kNaN;
    r.pct_of_roof = kNaN;
    return r;
  }
  const double compute_us = static_cast<double>(flops) / (roof.tflops * 1e12) * 1e6;
  const double memory_us = static_cast<double>(bytes) / (roof.bandwidth_gbs * 1e9) * 1e6;
  r.roof_us = std::max(compute_us, memory_us);
  r.pct_of_roof = r.roof_us / time_us * 100.0;
  return r;
}

}  // namespace tinyllama::bench
