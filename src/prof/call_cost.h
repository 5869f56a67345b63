#pragma once
// What one backend call computes and moves: the FLOPs and bytes of each op
// the passes call, from the call's own operands. The access-trace backend
// charges every call it records (prof/access_trace.h), so a step's cost is
// the recorded op sequence's -- the passes written once -- and not a second
// hand-kept copy of them (cost_model.h has the conventions).
#include <cstdint>
#include <initializer_list>

#include "core/mat.h"
#include "model/kernel_choices.h"
#include "model/step_ops.h"

namespace tinyllama::prof {

enum class OpKind { Gemm, Attention, Elementwise, Optimizer };

const char* op_kind_name(OpKind kind);  // "gemm", "attention", ...

struct CallCost {
  std::int64_t flops = 0;
  std::int64_t bytes = 0;
  int gemms = 0;  // GEMM launches (a split projection runs several)
  OpKind kind = OpKind::Elementwise;
};

// Nominal FLOPs per element of the non-matmul ops: enough to place them on
// the roofline (they are all far left of the ridge), never counted as model
// work.
inline constexpr std::int64_t kRmsNormForwardFlops = 4;  // square, sum, two scales
inline constexpr std::int64_t kRmsNormBackwardFlops = 8;
inline constexpr std::int64_t kRopeFlops = 3;  // 4 multiplies + 2 adds per rotated pair
inline constexpr std::int64_t kSiluForwardFlops = 4;
inline constexpr std::int64_t kSiluBackwardFlops = 8;
inline constexpr std::int64_t kSwigluForwardFlops = 5;  // silu, then the product
inline constexpr std::int64_t kSwigluBackwardFlops = 10;
inline constexpr std::int64_t kCrossEntropyFlops = 4;  // max, subtract, exp, sum per logit
inline constexpr std::int64_t kAdamWFlops = 12;
inline constexpr std::int64_t kSumSquaresFlops = 2;
inline constexpr std::int64_t kTokenBytes = 4;  // int32 token ids and targets

// Bytes of a Mat's elements (its view, not its stride).
std::int64_t mat_bytes(const Mat& m);

// The sum of the calls' costs; the op's kind is the weightiest of its calls'
// (a GEMM op with a conversion after it stays a GEMM op).
CallCost& operator+=(CallCost& a, const CallCost& b);

// c = op(a) op(b) (+ beta c): 2·M·N·K; reads a, b (and c when beta != 0),
// writes c.
CallCost gemm_cost(const Mat& c, const Mat& a, bool trans_a, const Mat& b, float beta);
// A GEMM that adds c as it writes d (GemmEpilogue::Residual).
CallCost gemm_add_cost(const Mat& d, const Mat& a, bool trans_a, const Mat& b, const Mat& c);
// SwigluImpl::Gemm: the gate/up GEMM that also writes h = silu(g)·u; the
// down projection's data gradient that reads g, u and writes dg, du instead
// of dh. The epilogues' few FLOPs are left out (a GEMM's are model work).
CallCost gemm_swiglu_forward_cost(const Mat& gate_up, const Mat& hidden, const Mat& x,
                                  const Mat& w_gu);
CallCost gemm_swiglu_backward_cost(const Mat& d_gate_up, const Mat& d_out, const Mat& w_down,
                                   const Mat& gate_up);

// Reads the inputs, writes the outputs, `flops_per` FLOPs per element of
// `work` (an elementwise op's nominal count).
CallCost elementwise_cost(std::initializer_list<Mat> reads, std::initializer_list<Mat> writes,
                          std::int64_t flops_per, const Mat& work);

// Causal attention: the causal half, 2·B·H·S²·hd forward (QKᵀ and PV), twice
// that backward. Reads q, k, v (backward: dout, and flash's out), the saved
// lse and probabilities; writes out and lse (backward: dq, dk, dv). Flash's
// D = rowsum(dout·out) is scratch and adds nothing.
CallCost attention_forward_cost(const Mat& out, const Mat& lse, const Mat& probs, const Mat& q,
                                const Mat& k, const Mat& v, const AttentionShape& shape);
CallCost attention_backward_cost(const Mat& dq, const Mat& dk, const Mat& dv, const Mat& dout,
                                 const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                                 const Mat& lse, const Mat& probs, const AttentionShape& shape);
// RopeImpl::Fused's backward: the rotation on the accumulators, reading only
// the (cos, sin) table once (fp32 pairs per position and pair).
std::int64_t rope_table_read_bytes(const AttentionShape& shape);

// The chunked loss in one kernel: the losses and dlogits over the logits,
// two reads and a write of the logits, one read where the kernel stages the
// rows in shared memory (as it does on Hopper, cuda/cross_entropy_rows.h).
CallCost cross_entropy_fused_cost(const Mat& losses, const Mat& logits, LossRows rows);

// AdamW over a span: reads param, grad, m, v; writes param, m, v and (AMP)
// the compute copy. FLOPs per element swept (padding included).
CallCost adamw_cost(const Mat& param, const Mat& compute_copy);

}  // namespace tinyllama::prof
