#pragma once
// The kernel bench's cases of SwiGLU (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

// SwiGLU fused or as silu and mul.
std::unique_ptr<OpCase> make_swiglu(BenchContext& ctx, Pass pass, bool fused);
// The GEMM beside the SwiGLU and the SwiGLU (forward: the gate/up GEMM;
// backward: the down projection's data gradient): in one kernel
// (Backend::gemm_swiglu_*, in_epilogue) or as the GEMM then the fused
// kernel (the composition the other levels run). The epilogue kernel's
// schedule is the prepared plan's (a variant pins one through its
// ImplChoice's KernelPins).
std::unique_ptr<OpCase> make_swiglu_gemm(BenchContext& ctx, Pass pass, bool in_epilogue);

}  // namespace tinyllama::bench
