#pragma once
// The CPU reference of AdamW, and the non-finite check of fp16 steps. Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).
#include <cstdint>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cpu {

// clip: gradient clipping's coefficient, multiplied into the unscaled gradient.
void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp, double clip = 1.0);
void flag_nonfinite(Mat x, std::int32_t* flag);

}  // namespace tinyllama::cpu
