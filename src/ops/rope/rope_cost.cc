#include "ops/rope/rope_cost.h"

namespace tinyllama::prof {

std::int64_t rope_table_read_bytes(const AttentionShape& shape) {
  constexpr std::int64_t kPairBytes = 8;  // an fp32 (cos, sin) pair
  return static_cast<std::int64_t>(shape.seq) * shape.head_dim / 2 * kPairBytes;
}

}  // namespace tinyllama::prof
