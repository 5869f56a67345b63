#pragma once
// The cross-entropy loss.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include <cstdint>

#include "core/mat.h"
#include "model/step_scalars.h"

namespace tinyllama {

class LossOps {
 public:
  virtual ~LossOps() = default;

  // losses[i] = logsumexp(logits[i]) - logits[i][targets[i]]  ([rows,1] stats dtype)
  virtual void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) = 0;
  // dlogits = (softmax(logits) - onehot(targets)) * scale; dlogits may alias logits.
  virtual void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                      float scale) = 0;
  // The same with scale = step->ce_grad_scale read when the op runs (step in
  // backend memory), so a captured step replays with each step's loss scale.
  virtual void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                      const StepScalars* step) = 0;
  // LossImpl::Chunked: cross_entropy_forward, then cross_entropy_backward in
  // place (dlogits over the logits, scale step->ce_grad_scale), as one op.
  virtual void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                                   const StepScalars* step) = 0;
};

}  // namespace tinyllama
