#pragma once
// The CPU references of the global gradient norm and its clip coefficient. Each entry point
// validates shapes, dispatches on the dtype (float32 or float64) and runs a plain loop nest;
// CpuBackend forwards to it (contract: model/step_ops.h).

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cpu {

void sum_squares(Mat x, double* acc);
void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm);

}  // namespace tinyllama::cpu
