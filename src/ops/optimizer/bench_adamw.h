#pragma once
// The kernel bench's cases of AdamW (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

// AdamW over layer 0's parameters, per tensor or one sweep.
std::unique_ptr<OpCase> make_adamw(BenchContext& ctx, bool fused);

}  // namespace tinyllama::bench
