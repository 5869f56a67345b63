#pragma once
// Host side of the TMA copies (tma.cuh), for the flash kernels and the SwiGLU
// GEMMs (ops/swiglu/swiglu_gemm): a tensor map per operand, built at
// each call from its Mat (cheap, host only; passed to the kernel by value,
// so a captured graph keeps its own). The driver's encoder is reached
// through the runtime, so nothing links libcuda directly.
#include <cuda.h>

#include "core/mat.h"

namespace tinyllama::cuda::arch {

// The columns [col0, col0 + cols) of every row of m (bf16 / fp16, rows
// 16-byte aligned) as 64-column boxes of box_rows rows, 128-byte swizzled;
// rows past the end read as zeros. Throws RuntimeFailure when the driver
// refuses.
CUtensorMap tma_map_2d(const Mat& m, int box_rows);

}  // namespace tinyllama::cuda::arch
