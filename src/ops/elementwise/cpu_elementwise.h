#pragma once
// The CPU references of the residual add and the product. Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).

#include "core/mat.h"

namespace tinyllama::cpu {

void add(Mat out, Mat a, Mat b);
void mul(Mat out, Mat a, Mat b);

}  // namespace tinyllama::cpu
