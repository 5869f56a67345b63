#pragma once
// The kernel bench's cases of the GEMMs (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

// The linear layers of one block and the tied LM head. The
// fused form is one GEMM; the split form runs one GEMM per part (q, k, v or
// gate, up) on row slices of the same weight, as unfused levels do.
enum class Linear { Qkv, OutProj, GateUp, Down, LmHead };
enum class GemmPass { Forward, InputGrad, WeightGrad };
std::unique_ptr<OpCase> make_gemm(BenchContext& ctx, Linear linear, GemmPass pass, bool split);

}  // namespace tinyllama::bench
