#pragma once
// Precision casts.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include "core/mat.h"

namespace tinyllama {

class ConvertOps {
 public:
  virtual ~ConvertOps() = default;

  // dst = src converted to dst.dtype (master weights -> compute copy).
  virtual void convert(Mat dst, Mat src) = 0;
};

}  // namespace tinyllama
