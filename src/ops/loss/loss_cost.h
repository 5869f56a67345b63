#pragma once
// The cross-entropy loss's FLOPs and bytes (ops/op_cost.h).
#include <cstdint>

#include "ops/op_cost.h"

namespace tinyllama::prof {

inline constexpr std::int64_t kCrossEntropyFlops = 4;  // max, subtract, exp, sum per logit

// The chunked loss in one kernel: the losses and dlogits over the logits,
// a read and a write of the logits from DRAM, two reads for rows longer
// than a Hopper block stages (ops/loss/cross_entropy_rows.h).
CallCost cross_entropy_fused_cost(const Mat& losses, const Mat& logits);

}  // namespace tinyllama::prof
