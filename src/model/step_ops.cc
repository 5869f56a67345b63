// The default ops, each the composition of the primitives it fuses (the
// reference): the fused optimizer sweep, the residual GEMM, the GEMM with
// SwiGLU, SwiGLU and the norm with the FP8 cast of their results, attention with RoPE's
// backward; and side GEMMs that run at once,
// in order.
#include "model/step_ops.h"

#include <stdexcept>

namespace tinyllama {

void StepOps::adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                          const AdamWHyper& hp) {
  adamw(param, grad, m, v, hp);
  if (!compute_copy.empty()) convert(compute_copy, param);
}

void StepOps::gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool trans_b, Mat c) {
  if (d.data == c.data) {
    gemm(d, a, trans_a, b, trans_b, 1.0f, 1.0f);
    return;
  }
  gemm(d, a, trans_a, b, trans_b, 1.0f, 0.0f);
  add(d, d, c);
}

void StepOps::gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu) {
  const std::int64_t f = hidden.cols;
  gemm(gate_up, x, false, w_gu, true, 1.0f, 0.0f);
  swiglu_forward(hidden, gate_up.col_block(0, f), gate_up.col_block(f, f));
}

void StepOps::gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                                   Mat gate_up) {
  const std::int64_t f = d_hidden.cols;
  gemm(d_hidden, d_out, false, w_down, false, 1.0f, 0.0f);
  swiglu_backward(d_gate_up.col_block(0, f), d_gate_up.col_block(f, f), d_hidden,
                  gate_up.col_block(0, f), gate_up.col_block(f, f));
}

void StepOps::rmsnorm_forward_fp8(Mat out, Mat rstd, Mat x, Mat weight, double eps,
                                  const Fp8Tensor& q, Fp8ScaleFrom from, bool /*keep_out*/) {
  rmsnorm_forward(out, rstd, x, weight, eps);
  quantize_fp8(out, q, from);
}

void StepOps::rmsnorm_apply_fp8(Mat out, Mat x, Mat weight, Mat rstd, const Fp8Tensor& q,
                                Fp8ScaleFrom from, bool /*keep_out*/) {
  rmsnorm_apply(out, x, weight, rstd);
  quantize_fp8(out, q, from);
}

void StepOps::swiglu_forward_fp8(Mat hidden, Mat gate, Mat up, const Fp8Tensor& q,
                                 Fp8ScaleFrom from, bool /*keep_hidden*/) {
  if (hidden.empty()) {
    throw std::logic_error(
        "swiglu_forward_fp8: the two ops need the output's bf16 buffer, and the plan gave it "
        "none (Fp8Linears::swiglu_keeps_codes)");
  }
  swiglu_forward(hidden, gate, up);
  quantize_fp8(hidden, q, from);
}

void StepOps::swiglu_backward_fp8(Mat d_gate_up, Mat dout, Mat gate, Mat up, const Fp8Tensor& q,
                                  Fp8ScaleFrom from, bool /*keep_grads*/) {
  if (d_gate_up.empty()) {
    throw std::logic_error(
        "swiglu_backward_fp8: the two ops need the gradient's bf16 buffer, and the plan gave it "
        "none (Fp8Linears::swiglu_grad_codes_only)");
  }
  const std::int64_t f = dout.cols;
  swiglu_backward(d_gate_up.col_block(0, f), d_gate_up.col_block(f, f), dout, gate, up);
  quantize_fp8(d_gate_up, q, from);
}

std::int64_t StepOps::side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                float beta) {
  gemm(c, a, trans_a, b, trans_b, alpha, beta);
  return 0;
}

std::int64_t StepOps::side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b,
                                          float alpha, float beta) {
  return side_gemm(c, a, trans_a, b, trans_b, alpha, beta);
}

void StepOps::gemm_fp8_add(Mat d, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                           bool trans_b, Mat c) {
  if (d.data != c.data) convert(d, c);
  gemm_fp8(d, a, trans_a, b, trans_b, /*accumulate=*/true);
}

std::int64_t StepOps::side_gemm_fp8_from_fork(Mat c, const Fp8Tensor& a, bool trans_a,
                                              const Fp8Tensor& b, bool trans_b, bool accumulate) {
  gemm_fp8(c, a, trans_a, b, trans_b, accumulate);
  return 0;
}

void StepOps::attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                                      Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                      const AttentionShape& shape, double rope_theta) {
  attention_backward(impl, dq, dk, dv, dout, q, k, v, out, lse, probs, shape);
  rope_backward(dq, shape.seq, shape.head_dim, rope_theta);
  rope_backward(dk, shape.seq, shape.head_dim, rope_theta);
}

}  // namespace tinyllama
