#pragma once
// The kernel bench's cases of RoPE (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

std::unique_ptr<OpCase> make_rope(BenchContext& ctx, Pass pass);

}  // namespace tinyllama::bench
