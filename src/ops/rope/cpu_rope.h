#pragma once
// The CPU reference of RoPE. Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).

#include "core/mat.h"

namespace tinyllama::cpu {

// direction +1 rotates forward, -1 applies the inverse.
void rope(Mat x, int seq, int head_dim, double theta, int direction);

}  // namespace tinyllama::cpu
