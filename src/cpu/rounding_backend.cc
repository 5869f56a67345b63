#include "cpu/rounding_backend.h"

#include "core/errors.h"
#include "core/narrow_float.h"

namespace tinyllama {
namespace {

double rounded(double x, DType t) {
  return t == DType::BF16 ? bf16_bits_to_double(round_to_bf16_bits(x))
                          : f16_bits_to_double(round_to_f16_bits(x));
}

}  // namespace

void round_to_dtype(std::vector<double>& values, DType dtype) {
  for (double& x : values) x = rounded(x, dtype);
}

RoundingBackend::RoundingBackend(DType rounded) : rounded_(rounded) {
  if (rounded != DType::BF16 && rounded != DType::F16) {
    throw UsageError("RoundingBackend: rounds to bfloat16 or float16, not " +
                     std::string(dtype_name(rounded)));
  }
}

std::string RoundingBackend::device_description() const {
  return "cpu float64 ops, outputs rounded to " + std::string(dtype_name(rounded_));
}

void RoundingBackend::round(Mat m) const {
  if (m.empty()) return;
  if (m.dtype != DType::F64) throw UsageError("RoundingBackend: runs float64 plans only");
  for (std::int64_t r = 0; r < m.rows; ++r) {
    double* row = m.ptr<double>() + r * m.ld;
    for (std::int64_t c = 0; c < m.cols; ++c) row[c] = rounded(row[c], rounded_);
  }
}

void RoundingBackend::convert(Mat dst, Mat src) {
  exact_.convert(dst, src);
  round(dst);
}
void RoundingBackend::gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                           float beta) {
  exact_.gemm(c, a, trans_a, b, trans_b, alpha, beta);
  round(c);
}
void RoundingBackend::gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                               bool trans_b, bool accumulate) {
  exact_.gemm_fp8(c, a, trans_a, b, trans_b, accumulate);
  round(c);
}
void RoundingBackend::add(Mat out, Mat a, Mat b) {
  exact_.add(out, a, b);
  round(out);
}
void RoundingBackend::mul(Mat out, Mat a, Mat b) {
  exact_.mul(out, a, b);
  round(out);
}
void RoundingBackend::embedding_forward(Mat out, const std::int32_t* tokens, Mat table) {
  exact_.embedding_forward(out, tokens, table);
  round(out);
}
void RoundingBackend::embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) {
  exact_.embedding_backward(dtable, tokens, dout);
  round(dtable);
}
void RoundingBackend::rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) {
  exact_.rmsnorm_forward(out, rstd, x, weight, eps);
  round(out);
}
// The recomputed norm output (--activations recompute_norms), rounded as
// the stored one is.
void RoundingBackend::rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) {
  exact_.rmsnorm_apply(out, x, weight, rstd);
  round(out);
}
void RoundingBackend::rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) {
  exact_.rmsnorm_backward(dx, dweight, dout, x, weight, rstd);
  round(dx);
  round(dweight);
}
void RoundingBackend::add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                                          double eps) {
  // Two rounded ops, as the plain norm path stores them: the sum is rounded
  // before the norm reads it.
  exact_.add(sum, a, b);
  round(sum);
  exact_.rmsnorm_forward(out, rstd, sum, weight, eps);
  round(out);
}
void RoundingBackend::rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight,
                                           Mat rstd, Mat dresidual) {
  exact_.rmsnorm_backward_add(dx, dweight, dout, x, weight, rstd, dresidual);
  round(dx);
  round(dweight);
}
void RoundingBackend::rope_forward(Mat x, int seq, int head_dim, double theta) {
  exact_.rope_forward(x, seq, head_dim, theta);
  round(x);
}
void RoundingBackend::rope_backward(Mat dx, int seq, int head_dim, double theta) {
  exact_.rope_backward(dx, seq, head_dim, theta);
  round(dx);
}
void RoundingBackend::attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q,
                                        Mat k, Mat v, const AttentionShape& shape) {
  exact_.attention_forward(impl, out, lse, probs, q, k, v, shape);
  round(out);
  round(probs);
}
void RoundingBackend::attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout,
                                         Mat q, Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                         const AttentionShape& shape) {
  exact_.attention_backward(impl, dq, dk, dv, dout, q, k, v, out, lse, probs, shape);
  round(dq);
  round(dk);
  round(dv);
}
void RoundingBackend::silu_forward(Mat out, Mat x) {
  exact_.silu_forward(out, x);
  round(out);
}
void RoundingBackend::silu_backward(Mat dx, Mat dout, Mat x) {
  exact_.silu_backward(dx, dout, x);
  round(dx);
}
void RoundingBackend::swiglu_forward(Mat out, Mat gate, Mat up) {
  exact_.swiglu_forward(out, gate, up);
  round(out);
}
void RoundingBackend::swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) {
  exact_.swiglu_backward(dgate, dup, dout, gate, up);
  round(dgate);
  round(dup);
}
void RoundingBackend::cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) {
  exact_.cross_entropy_forward(losses, logits, targets);
}
void RoundingBackend::cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                             float scale) {
  exact_.cross_entropy_backward(dlogits, logits, targets, scale);
  round(dlogits);
}
void RoundingBackend::cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                             const StepScalars* step) {
  exact_.cross_entropy_backward(dlogits, logits, targets, step);
  round(dlogits);
}
void RoundingBackend::cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                                          const StepScalars* step) {
  exact_.cross_entropy_fused(losses, logits, targets, step);
  round(logits);  // now the logits' gradient
}
void RoundingBackend::adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) {
  exact_.adamw(param, grad, m, v, hp);  // master weights and moments: kept exact
}
void RoundingBackend::flag_nonfinite(Mat x, std::int32_t* flag) {
  exact_.flag_nonfinite(x, flag);
}
void RoundingBackend::sum_squares(Mat x, double* acc) {
  exact_.sum_squares(x, acc);  // master gradients: kept exact
}
void RoundingBackend::clip_by_norm(const double* acc, double max_norm, StepScalars* step,
                                   float* norm) {
  exact_.clip_by_norm(acc, max_norm, step, norm);
}

}  // namespace tinyllama
