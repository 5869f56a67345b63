#pragma once
#include <cstdint>
#include <vector>

#include "model/param_layout.h"

namespace tinyllama {

// DESIGN §1: every linear and the embedding ~ N(0, 0.02), norm weights 1,
// drawn on the host from one seeded generator in layout order. Padding is 0.
std::vector<double> initial_weights(const ParamLayout& layout, std::uint64_t seed);

}  // namespace tinyllama
