#pragma once
// The CPU reference of the precision casts. Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).

#include "core/mat.h"

namespace tinyllama::cpu {

// Any of F32, F64, BF16, F16 to any of them.
void convert(Mat dst, Mat src);

}  // namespace tinyllama::cpu
