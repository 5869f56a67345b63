#pragma once
// The CPU reference GEMM (OpenBLAS for fp32 where present, cpu_blas.h). Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).

#include "core/mat.h"

namespace tinyllama::cpu {

void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, double alpha, double beta);

}  // namespace tinyllama::cpu
