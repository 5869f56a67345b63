#pragma once
// The GEMMs' FLOPs and bytes (ops/op_cost.h).
#include "ops/op_cost.h"

namespace tinyllama::prof {

// c = op(a) op(b) (+ beta c): 2·M·N·K; reads a, b (and c when beta != 0),
// writes c.
CallCost gemm_cost(const Mat& c, const Mat& a, bool trans_a, const Mat& b, float beta);
// A GEMM that adds c as it writes d (GemmEpilogue::Residual).
CallCost gemm_add_cost(const Mat& d, const Mat& a, bool trans_a, const Mat& b, const Mat& c);

}  // namespace tinyllama::prof
