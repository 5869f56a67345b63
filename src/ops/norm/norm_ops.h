#pragma once
// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include "core/mat.h"
#include "ops/linear/fp8_tensor.h"

namespace tinyllama {

class NormOps {
 public:
  virtual ~NormOps() = default;

  // rstd: [rows, 1] in stats dtype, saved for backward.
  virtual void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) = 0;
  // dx and dweight ([1, D], master dtype) are overwritten.
  virtual void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) = 0;
  // NormImpl::Fused, forward: sum = a + b (rounded to sum's dtype; sum may
  // alias a or b), then out = RMSNorm(sum) as rmsnorm_forward computes it
  // from the stored sum. One pass instead of an add and a norm.
  virtual void add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                                   double eps) = 0;
  // NormImpl::Fused, backward: dx = dresidual + the norm's input gradient
  // (summed before rounding), dweight as rmsnorm_backward; dx may alias
  // dresidual or dout.
  virtual void rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                                    Mat dresidual) = 0;
  // out = x * rstd * weight with the rstd that rmsnorm_forward (or
  // add_rmsnorm_forward) saved for this x: bit-identical to the out it
  // wrote. ActivationsImpl::RecomputeNorms's backward pass remakes the
  // normalised inputs with it instead of keeping them per layer.
  virtual void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) = 0;
  // rmsnorm_forward whose result an FP8 GEMM reads, as rmsnorm_apply_fp8
  // below (out is scratch unless keep_out; rstd is always written).
  virtual void rmsnorm_forward_fp8(Mat out, Mat rstd, Mat x, Mat weight, double eps,
                                   const Fp8Tensor& q, Fp8ScaleFrom from, bool keep_out) = 0;
  // rmsnorm_apply whose result an FP8 GEMM reads (issue 45,
  // Fp8Linears::norm_casts): q (x's shape) gets the codes of the values
  // rmsnorm_apply stores in out, scaled as quantize_fp8(out, q, from) scales
  // them; out holds those values afterwards only when keep_out, else it is
  // scratch the op may leave as it was. The default (StepOps) is the two
  // ops; a backend that knows the scale before the pass (Kept, History) may
  // write the codes from the norm's kernel itself.
  virtual void rmsnorm_apply_fp8(Mat out, Mat x, Mat weight, Mat rstd, const Fp8Tensor& q,
                                 Fp8ScaleFrom from, bool keep_out) = 0;
};

}  // namespace tinyllama
