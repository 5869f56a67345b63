#pragma once
// The CPU references of RMSNorm. Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).

#include "core/mat.h"

namespace tinyllama::cpu {

void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps);
// out = x * rstd * weight with a saved rstd: what rmsnorm_forward wrote.
void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd);
// With dresidual (NormImpl::Fused): dx = dresidual + the norm's input
// gradient, summed in double before the one rounding; dx may alias it.
void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                      Mat dresidual = Mat());

}  // namespace tinyllama::cpu
