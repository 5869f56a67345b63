#pragma once
// The kernel bench's cases of the cross-entropy loss (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

std::unique_ptr<OpCase> make_cross_entropy(BenchContext& ctx, Pass pass);
// LossImpl::Chunked's loss and dlogits in one kernel; its rows are staged
// or streamed as the prepared plan says (a variant pins LossRows::Staged or
// Streamed through its ImplChoice's KernelPins, op_registry.cc).
std::unique_ptr<OpCase> make_cross_entropy_fused(BenchContext& ctx);

}  // namespace tinyllama::bench
