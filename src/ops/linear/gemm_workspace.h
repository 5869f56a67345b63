#pragma once
// The cuBLASLt workspace a stream's GEMMs get, from the largest output
// they write. The runners choose among the algorithms that fit
// (cuda_gemm.h), so a workspace smaller than the library's recommended
// 32 MiB only drops candidates that need more.
//
// What the chosen algorithms needed, measured on an H200 (CUDA 13, v4, the
// workshop model to 1 B parameters, bf16, fp32 and FP8; docs/log/2026-11-29.md,
// sixth session, call 1): a split-K algorithm asks for one fp32 copy of its
// output (4 bytes per element, plus 16); the others for at most 4 bytes.
//  - Weight gradients (K = tokens, few output tiles at small models) chose
//    split-K at the workshop model, B32 S1024 and the GPT-2 size: 8-9 MiB.
//  - Forward and data-gradient GEMMs of a 16-bit step chose no split at any
//    shape; in fp32 (SIMT kernels) the workshop's forward chose one: 16 MiB,
//    its largest output.
#include <cstdint>

namespace tinyllama {

// Forward and data-gradient GEMMs: one fp32 copy of their largest output
// (at most 32 MiB) in fp32 compute, 1 MiB in 16-bit compute.
std::int64_t forward_gemm_workspace_bytes(std::int64_t largest_output_elems, bool fp32_compute);

// Weight-gradient GEMMs: one fp32 copy of their largest output, at most
// 16 MiB (twice the most a measured step asked for).
std::int64_t weight_gradient_gemm_workspace_bytes(std::int64_t largest_output_elems);

}  // namespace tinyllama
