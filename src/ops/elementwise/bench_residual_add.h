#pragma once
// The kernel bench's cases of the residual add (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

std::unique_ptr<OpCase> make_residual_add(BenchContext& ctx);

}  // namespace tinyllama::bench
