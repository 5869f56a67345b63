#pragma once
// RMSNorm's nominal FLOPs per element (ops/op_cost.h; its bytes are the
// operands', elementwise_cost).
#include <cstdint>

#include "ops/op_cost.h"

namespace tinyllama::prof {

inline constexpr std::int64_t kRmsNormForwardFlops = 4;  // square, sum, two scales
inline constexpr std::int64_t kRmsNormBackwardFlops = 8;

}  // namespace tinyllama::prof
