#pragma once
// The optimizer's FLOPs and bytes (ops/op_cost.h).
#include <cstdint>

#include "ops/op_cost.h"

namespace tinyllama::prof {

inline constexpr std::int64_t kAdamWFlops = 12;
inline constexpr std::int64_t kSumSquaresFlops = 2;

// AdamW over a span: reads param, grad, m, v; writes param, m, v and (AMP)
// the compute copy. FLOPs per element swept (padding included).
CallCost adamw_cost(const Mat& param, const Mat& compute_copy);

}  // namespace tinyllama::prof
