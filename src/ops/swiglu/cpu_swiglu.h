#pragma once
// The CPU references of SiLU and the fused SwiGLU (bit-identical to silu -> mul). Each entry point
// validates shapes, dispatches on the dtype (float32 or float64) and runs a plain loop nest;
// CpuBackend forwards to it (contract: model/step_ops.h).

#include "core/mat.h"

namespace tinyllama::cpu {

void silu_forward(Mat out, Mat x);
void silu_backward(Mat dx, Mat dout, Mat x);
void swiglu_forward(Mat out, Mat gate, Mat up);
void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up);

}  // namespace tinyllama::cpu
