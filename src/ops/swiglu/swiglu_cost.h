#pragma once
// SwiGLU's FLOPs and bytes (ops/op_cost.h): the pointwise ops' nominal
// FLOPs per element, and the GEMM with SwiGLU in its epilogue.
#include <cstdint>

#include "ops/op_cost.h"

namespace tinyllama::prof {

inline constexpr std::int64_t kSiluForwardFlops = 4;
inline constexpr std::int64_t kSiluBackwardFlops = 8;
inline constexpr std::int64_t kSwigluForwardFlops = 5;  // silu, then the product
inline constexpr std::int64_t kSwigluBackwardFlops = 10;

// SwigluImpl::Gemm: the gate/up GEMM that also writes h = silu(g)·u; the
// down projection's data gradient that reads g, u and writes dg, du instead
// of dh. The epilogues' few FLOPs are left out (a GEMM's are model work).
CallCost gemm_swiglu_forward_cost(const Mat& gate_up, const Mat& hidden, const Mat& x,
                                  const Mat& w_gu);
CallCost gemm_swiglu_backward_cost(const Mat& d_gate_up, const Mat& d_out, const Mat& w_down,
                                   const Mat& gate_up);

}  // namespace tinyllama::prof
