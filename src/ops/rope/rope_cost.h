#pragma once
// RoPE's FLOPs and bytes (ops/op_cost.h).
#include <cstdint>

#include "ops/attention/attention_ops.h"
#include "ops/op_cost.h"

namespace tinyllama::prof {

inline constexpr std::int64_t kRopeFlops = 3;  // 4 multiplies + 2 adds per rotated pair

// RopeImpl::Fused's backward: the rotation on the accumulators, reading only
// the (cos, sin) table once (fp32 pairs per position and pair).
std::int64_t rope_table_read_bytes(const AttentionShape& shape);

}  // namespace tinyllama::prof
