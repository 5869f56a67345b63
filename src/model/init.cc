#include "model/init.h"

#include "core/rng.h"

namespace tinyllama {

std::vector<double> initial_weights(const ParamLayout& layout, std::uint64_t seed, double stddev) {
  std::vector<double> w(static_cast<std::size_t>(layout.total()), 0.0);
  Rng rng(seed);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      // Rounded to fp32 so fp32 and fp64 runs start from identical values.
      w[s.offset + i] = s.is_norm ? 1.0 : static_cast<float>(stddev * rng.normal());
    }
  }
  return w;
}

}  // namespace tinyllama
