#pragma once
// Dense algebra: the GEMMs, and the side GEMMs the backward pass overlaps.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include <cstdint>

#include "core/mat.h"
#include "ops/linear/fp8_tensor.h"

namespace tinyllama {

class LinearOps {
 public:
  virtual ~LinearOps() = default;

  // c = alpha * op(a) * op(b) + beta * c, row-major; op transposes when the
  // flag is set. c may be wider-typed than a and b (fp32 weight gradients
  // from bf16 activations).
  virtual void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) = 0;
  // d = op(a) * op(b) + c (GemmEpilogue::Residual: a projection that adds
  // into the residual stream). d and c have one shape; d may alias c. The
  // CUDA backend runs one GEMM with beta = 1 reading c and writing d, so the
  // sum is rounded once; the default (StepOps) is a GEMM into d, then add().
  virtual void gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool trans_b, Mat c) = 0;
  // gemm() that may run concurrently with the ops issued after it, until
  // join_side_gemm(ticket) or join_side_gemms(); it starts after every op
  // issued before it. For the weight gradients of the backward pass: the
  // caller joins before any op that overwrites what the GEMM reads, and
  // before anything reads c. The CUDA backend with CUDA graphs on runs it
  // on a second stream (a parallel branch of the captured step); the
  // default runs gemm() at once and returns ticket 0.
  virtual std::int64_t side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                 float beta) = 0;
  // side_gemm() that starts after the ops issued before the last
  // fork_side_gemms() rather than after every op issued before it. The
  // input-gradient GEMM on the critical path is issued first, between the
  // two calls, and so launched first: a weight-gradient GEMM launched
  // ahead of it takes the SMs it needs, and it waits. The caller makes sure
  // that nothing issued since the fork writes what this GEMM reads. The
  // default is side_gemm().
  virtual std::int64_t side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b,
                                           float alpha, float beta) = 0;

  // The FP8 linear layers (issue 45; ops/linear/fp8_tensor.h).
  //
  // q = x quantised: with Fp8ScaleFrom::Amax, q's amax becomes max |x| and
  // its scale and inverse follow from it (cpu::fp8_scale_for, margin 0);
  // with Kept they are q's already; with History too, and q's amax is
  // raised to max |x| (the bit-pattern maximum: NaN stays NaN). Then the
  // copies q has (codes, codes_t) get x * scale rounded to q.format
  // (nearest even, saturating). q's shape is x's.
  virtual void quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) = 0;
  // Delayed scaling's step boundary, for `count` scalar blocks of format f
  // laid out kFp8Block floats apart from `blocks`: each block's amax is
  // pushed onto the front of its history (the oldest dropped), its scale
  // and inverse become fp8_scale_for(the history's maximum) and its
  // inverse, and its amax is zeroed for the casts to come.
  virtual void fp8_update_scales(float* blocks, int count, Fp8Format f) = 0;
  // c = op(a) * op(b) * inverse_a * inverse_b (+ c when accumulate), the
  // products of codes summed in fp32, rounded once to c's dtype (bf16 or
  // fp32). op(a) = a reads a.codes, a^T (trans_a) a.codes_t; op(b) = b^T
  // (trans_b) reads b.codes, b reads b.codes_t: the copies whose rows run
  // along the summed dimension.
  virtual void gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                        bool accumulate) = 0;
  // d = op(a) * op(b) * inverse_a * inverse_b + c, as gemm_add is to
  // gemm(): d and c have one shape and dtype; d may alias c. The CUDA
  // backend reads c as cuBLASLt's C and writes d, one GEMM; the default
  // (StepOps) copies c into d, then accumulates.
  virtual void gemm_fp8_add(Mat d, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                            bool trans_b, Mat c) = 0;
  // gemm_fp8 as side_gemm_from_fork runs gemm(): the weight gradients.
  // The default is gemm_fp8 at once, ticket 0.
  virtual std::int64_t side_gemm_fp8_from_fork(Mat c, const Fp8Tensor& a, bool trans_a,
                                               const Fp8Tensor& b, bool trans_b,
                                               bool accumulate) = 0;
};

}  // namespace tinyllama
