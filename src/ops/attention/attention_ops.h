#pragma once
// Causal GQA attention, scale 1/sqrt(hd).
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include "core/mat.h"
#include "model/config.h"
#include "model/step_plan.h"

namespace tinyllama {

struct AttentionShape {
  int batch = 0;
  int seq = 0;
  int heads = 0;     // query heads H
  int kv_heads = 0;  // K; query head h reads kv head h / (H / K)
  int head_dim = 0;
};

// The attention of a model at a batch shape.
inline AttentionShape attention_shape(const ModelConfig& cfg, BatchShape shape) {
  return {shape.batch, shape.seq, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim()};
}

// Throws std::invalid_argument unless probs is given exactly when impl is
// Materialized (the backends' shared check of the attention contract).
void require_probs_match(AttentionImpl impl, Mat probs, const char* op);

class AttentionOps {
 public:
  virtual ~AttentionOps() = default;

  // q, out: [B*S, H*hd]; k, v: [B*S, K*hd]; lse: [B*H, S] stats dtype.
  // impl Materialized: probs [B*H*S, S] holds the softmax probabilities for
  // backward; impl Flash: probs is empty and backward recomputes them from
  // lse. A backend refuses a probs that does not match impl.
  virtual void attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k,
                                 Mat v, const AttentionShape& shape) = 0;
  // dq, dk, dv overwritten; dk/dv sum over the query heads of each group.
  virtual void attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                                  Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                  const AttentionShape& shape) = 0;
  // RopeImpl::Fused: attention_backward, then rope_backward (rope_theta,
  // shape.head_dim) on dq and dk, as one op. The default (StepOps) is that
  // composition (the CPU reference's implementation); the CUDA backend
  // rotates dQ and dK in its flash kernels before rounding them.
  virtual void attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                                       Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                       const AttentionShape& shape, double rope_theta) = 0;
};

}  // namespace tinyllama
