#pragma once
// The cuBLASLt workspace a stream's GEMMs get, from the step's precision
// and the largest output they write. The runners choose among the algorithms that fit
// (cuda_gemm.h), so a workspace smaller than the library's recommended
// 32 MiB only drops candidates that need more.
//
// What the chosen algorithms needed, measured on an H200 (CUDA 13, v4, the
// workshop model to 1 B parameters, bf16, fp32 and FP8; docs/log/2026-11-29.md,
// sixth session, calls 1 and 2), with both workspaces at 32 MiB:
//  - 16-bit steps: a split-K weight gradient (K = tokens, few output tiles
//    at small models: the workshop model, B32 S1024, the GPT-2 size) asked
//    for one fp32 copy of its output plus 16 bytes (8-9 MiB); no forward
//    or data-gradient GEMM asked for more than 4 bytes. With these sizes
//    the same algorithms ran and the step time stayed within its spread.
//  - fp32 steps (SIMT kernels): the forward split asked for 16 MiB and the
//    weight gradients 8 MiB at the workshop model; offered just that much,
//    the heuristic offered no split at all and the step ran 11-20 % slower.
//    fp32 keeps the library's 32 MiB.
#include <cstdint>

namespace tinyllama {

// Forward and data-gradient GEMMs: 32 MiB in fp32 compute, 1 MiB in 16-bit.
std::int64_t forward_gemm_workspace_bytes(bool fp32_compute);

// Weight-gradient GEMMs: 32 MiB in fp32 compute; in 16-bit, one fp32 copy
// of their largest output, at most 16 MiB (above the 9 MiB the most a
// measured step asked for).
std::int64_t weight_gradient_gemm_workspace_bytes(std::int64_t largest_output_elems,
                                                  bool fp32_compute);

}  // namespace tinyllama
