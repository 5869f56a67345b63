// The linear layers' GEMMs under --amp-dtype float8 (model.h, issue 45):
// each GEMM StepPlan::fp8 puts in FP8 reads FP8 copies of its operands,
// quantised here with one scale per tensor; the others run in bf16 as they
// do without FP8.
#include "model/model.h"

namespace tinyllama {

void Model::fp8_forward(LinearKind kind, int l, Mat y, Mat x, Mat w, bool accumulate) {
  const LinearShape s = linear_shape(cfg_, shape_, kind);
  const Fp8Tensor qx = acts_.fp8.forward_input(arena_, kind, l, s);
  const Fp8Tensor qw = acts_.fp8.forward_weight(arena_, kind, l, s);
  backend_.quantize_fp8(x, qx, Fp8ScaleFrom::Amax);
  backend_.quantize_fp8(w, qw, Fp8ScaleFrom::Amax);
  backend_.gemm_fp8(y, qx, false, qw, true, accumulate);
}

void Model::linear_forward(LinearKind kind, int l, Mat y, Mat x, Mat w) {
  if (plan_.fp8.at(kind, LinearPass::Forward)) {
    fp8_forward(kind, l, y, x, w, /*accumulate=*/false);
    return;
  }
  backend_.gemm(y, x, false, w, true, 1.0f, 0.0f);
}

void Model::linear_forward_add(LinearKind kind, int l, Mat y, Mat x, Mat w, Mat residual) {
  if (!plan_.fp8.at(kind, LinearPass::Forward)) {
    backend_.gemm_add(y, x, false, w, true, residual);
    return;
  }
  if (y.data != residual.data) backend_.convert(y, residual);
  fp8_forward(kind, l, y, x, w, /*accumulate=*/true);
}

Model::Fp8Grads Model::fp8_backward_operands(LinearKind kind, int l, Mat d_out, Mat in, Mat w) {
  const bool dgrad = plan_.fp8.at(kind, LinearPass::Dgrad);
  const bool wgrad = plan_.fp8.at(kind, LinearPass::Wgrad);
  Fp8Grads q;
  if (!dgrad && !wgrad) return q;
  const LinearShape s = linear_shape(cfg_, shape_, kind);
  // x's and W's transposed copies take the forward's scale when it was FP8
  // (the same tensors: the same codes), else their own amax.
  const Fp8ScaleFrom kept =
      plan_.fp8.at(kind, LinearPass::Forward) ? Fp8ScaleFrom::Kept : Fp8ScaleFrom::Amax;
  q.dy = acts_.fp8.gradient(arena_, kind, s, dgrad, wgrad);
  backend_.quantize_fp8(d_out, q.dy, Fp8ScaleFrom::Amax);
  if (dgrad) {
    q.w_t = acts_.fp8.backward_weight(arena_, kind, l, s);
    backend_.quantize_fp8(w, q.w_t, kept);
  }
  if (wgrad) {
    q.x_t = acts_.fp8.backward_input(arena_, kind, l, s);
    backend_.quantize_fp8(in, q.x_t, kept);
  }
  return q;
}

void Model::linear_dgrad(LinearKind kind, const Fp8Grads& q, Mat d_in, Mat d_out, Mat w) {
  if (plan_.fp8.at(kind, LinearPass::Dgrad)) {
    backend_.gemm_fp8(d_in, q.dy, false, q.w_t, false, false);
    return;
  }
  backend_.gemm(d_in, d_out, false, w, false, 1.0f, 0.0f);
}

std::int64_t Model::linear_wgrad(LinearKind kind, const Fp8Grads& q, Mat dw, Mat d_out, Mat in) {
  if (plan_.fp8.at(kind, LinearPass::Wgrad)) {
    return backend_.side_gemm_fp8_from_fork(dw, q.dy, true, q.x_t, false, false);
  }
  return backend_.side_gemm_from_fork(dw, d_out, true, in, false, 1.0f, 0.0f);
}

}  // namespace tinyllama
