#pragma once
// Attention's FLOPs and bytes (ops/op_cost.h).
#include "ops/attention/attention_ops.h"
#include "ops/op_cost.h"

namespace tinyllama::prof {

// Causal attention: the causal half, 2·B·H·S²·hd forward (QKᵀ and PV), twice
// that backward. Reads q, k, v (backward: dout, and flash's out), the saved
// lse and probabilities; writes out and lse (backward: dq, dk, dv). Flash's
// D = rowsum(dout·out) is scratch and adds nothing.
CallCost attention_forward_cost(const Mat& out, const Mat& lse, const Mat& probs, const Mat& q,
                                const Mat& k, const Mat& v, const AttentionShape& shape);
CallCost attention_backward_cost(const Mat& dq, const Mat& dk, const Mat& dv, const Mat& dout,
                                 const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                                 const Mat& lse, const Mat& probs, const AttentionShape& shape);

}  // namespace tinyllama::prof
