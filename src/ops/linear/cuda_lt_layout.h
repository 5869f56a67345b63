#pragma once
// What both cuBLASLt GEMMs (cuda_gemm.h's and cuda_gemm_fp8.h's) say to
// cuBLASLt the same way: a row-major matrix as its layout, the alignment
// hint its heuristic is given, a 16/32-bit DType as cuBLASLt's type, the
// SMs a GEMM leaves to a kernel beside it, and a cached plan's release.
#include <cublasLt.h>

#include <cstdint>

#include "core/dtype.h"

namespace tinyllama::cuda {

// cuBLASLt's type of a bf16, fp16 or fp32 matrix; false for any other.
bool lt_data_type(DType t, cudaDataType_t* out);

// The largest power of two, up to 256, dividing the address and the byte
// strides (row, and batch where there is one): cuBLASLt's heuristic
// otherwise assumes 256-byte alignment, and column slices of fused buffers
// (q/k/v of qkv) can start anywhere, with any row stride.
std::int64_t lt_alignment(const void* p, std::int64_t row_bytes, std::int64_t batch_bytes = 0);

// Column-major layout of a row-major rows x cols matrix (cols x rows, the
// same ld), a strided batch of them where batch > 1.
cublasLtMatrixLayout_t row_major_layout(std::int64_t type, std::int64_t rows, std::int64_t cols,
                                        std::int64_t ld, std::int64_t batch = 1,
                                        std::int64_t stride = 0);

// Sizes the GEMM's grid to the current device's SMs less `margin`
// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; at least one): a persistent grid
// of every SM, beside a kernel that holds some, waits for them with part of
// its tiles. margin <= 0 leaves the descriptor as it is (every SM).
void leave_sms(cublasLtMatmulDesc_t desc, std::int64_t margin);

// Frees a cached plan's descriptor and three layouts (any may be null);
// never throws, for destructors and the unwinding of a failed plan.
template <typename Plan>
void destroy_lt_plan(const Plan& plan) noexcept {
  cublasLtMatrixLayoutDestroy(plan.a);
  cublasLtMatrixLayoutDestroy(plan.b);
  cublasLtMatrixLayoutDestroy(plan.c);
  cublasLtMatmulDescDestroy(plan.desc);
}

}  // namespace tinyllama::cuda
