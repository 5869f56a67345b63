#pragma once
// The cross-entropy loss's FLOPs and bytes (ops/op_cost.h).
#include <cstdint>

#include "model/kernel_choices.h"
#include "ops/op_cost.h"

namespace tinyllama::prof {

inline constexpr std::int64_t kCrossEntropyFlops = 4;  // max, subtract, exp, sum per logit

// The chunked loss in one kernel: the losses and dlogits over the logits,
// two reads and a write of the logits, one read where the kernel stages the
// rows in shared memory (as it does on Hopper, ops/loss/cross_entropy_rows.h).
CallCost cross_entropy_fused_cost(const Mat& losses, const Mat& logits, LossRows rows);

}  // namespace tinyllama::prof
