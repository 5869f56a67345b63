#pragma once
// The CPU references of incremental decoding. Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).
#include <cstdint>

#include "core/mat.h"

namespace tinyllama::cpu {

// RoPE with row r at position first_position + r; attention of q's rows
// (positions first_position + t) over the cache's rows
// 0..first_position + t, the cache holding exactly first_position + q.rows
// rows.
void rope_at(Mat x, std::int64_t first_position, int head_dim, double theta);
void cached_attention(Mat out, Mat q, Mat k_cache, Mat v_cache, std::int64_t first_position,
                      int heads, int kv_heads, int head_dim);

}  // namespace tinyllama::cpu
