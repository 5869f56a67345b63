#pragma once
// The kernel bench's cases of RMSNorm (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

// The norms' kernels run as the prepared plan says: a variant pins what
// the current kernels replaced through its ImplChoice's KernelPins
// (NormWeightSum::SecondKernel, NormLongRows::OneWarp), op_registry.cc.

std::unique_ptr<OpCase> make_rmsnorm(BenchContext& ctx, Pass pass);
// rmsnorm_apply: a norm's output remade from its saved rstd.
std::unique_ptr<OpCase> make_rmsnorm_apply(BenchContext& ctx);

// NormImpl::Fused's residual add + RMSNorm.
std::unique_ptr<OpCase> make_residual_norm(BenchContext& ctx, Pass pass);

}  // namespace tinyllama::bench
