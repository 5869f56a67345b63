#pragma once
// The residual add and the product.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include "core/mat.h"

namespace tinyllama {

class ElementwiseOps {
 public:
  virtual ~ElementwiseOps() = default;

  // out = a + b elementwise; out may alias a or b.
  virtual void add(Mat out, Mat a, Mat b) = 0;
  // out = a * b elementwise; out may alias a or b.
  virtual void mul(Mat out, Mat a, Mat b) = 0;
};

}  // namespace tinyllama
