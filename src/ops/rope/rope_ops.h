#pragma once
// RoPE, interleaved pairs, in place.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include "core/mat.h"

namespace tinyllama {

class RopeOps {
 public:
  virtual ~RopeOps() = default;

  // x: [batch*seq, n_heads*head_dim]; row r is position r % seq.
  virtual void rope_forward(Mat x, int seq, int head_dim, double theta) = 0;
  // The inverse rotation: the gradient of an orthogonal map.
  virtual void rope_backward(Mat dx, int seq, int head_dim, double theta) = 0;
};

}  // namespace tinyllama
