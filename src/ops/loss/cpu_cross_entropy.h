#pragma once
// The CPU references of the cross-entropy loss. Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).
#include <cstdint>

#include "core/mat.h"

namespace tinyllama::cpu {

void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets);
void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets, double scale);

}  // namespace tinyllama::cpu
