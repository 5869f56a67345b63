#pragma once
#include <cstdint>
#include <vector>

#include "model/param_layout.h"

namespace tinyllama {

// DESIGN §1: every linear and the embedding ~ N(0, 0.02), norm weights 1,
// drawn on the host from one seeded generator in layout order. Padding is 0.
inline constexpr double kInitStddev = 0.02;
// stddev: kInitStddev, or the exercise fault broken-init's 1.0
// (model/faults.h): the same draws, unscaled.
std::vector<double> initial_weights(const ParamLayout& layout, std::uint64_t seed,
                                    double stddev = kInitStddev);

}  // namespace tinyllama
