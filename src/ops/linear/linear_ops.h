#pragma once
// Dense algebra: the GEMMs, and the side GEMMs the backward pass overlaps.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include <cstdint>

#include "core/mat.h"

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
};

}  // namespace tinyllama
