#pragma once
// The CPU references of the token embedding and its gradient. Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).
#include <cstdint>

#include "core/mat.h"

namespace tinyllama::cpu {

void embedding_forward(Mat out, const std::int32_t* tokens, Mat table);
void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout);

}  // namespace tinyllama::cpu
