#pragma once
// The CPU reference of the FP8 linear layers' two ops (LinearOps::
// quantize_fp8 and gemm_fp8, issue 45), on host memory: what the CPU
// backend runs and the CUDA backend's ops are checked against. Built from
// cpu_fp8.h's scale, codec and TN GEMM; x and c are float32 or float64
// (a float64 x is rounded to fp32 first, as the device reads fp32).
#include "core/mat.h"
#include "ops/linear/fp8_tensor.h"

namespace tinyllama::cpu {

void quantize_fp8_tensor(const Mat& x, const Fp8Tensor& q, Fp8ScaleFrom from);

// LinearOps::fp8_update_scales on the host (the blocks in host memory).
void update_fp8_scales(float* blocks, int count, Fp8Format f);

void gemm_fp8_tensor(const Mat& c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                     bool trans_b, bool accumulate);

}  // namespace tinyllama::cpu
