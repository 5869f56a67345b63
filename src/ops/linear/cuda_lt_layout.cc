#include "ops/linear/cuda_lt_layout.h"

#include <algorithm>

#include "device/cuda_check.h"
#include "device/cuda_launch.h"

namespace tinyllama::cuda {

bool lt_data_type(DType t, cudaDataType_t* out) {
  switch (t) {
    case DType::F32:
      *out = CUDA_R_32F;
      return true;
    case DType::BF16:
      *out = CUDA_R_16BF;
      return true;
    case DType::F16:
      *out = CUDA_R_16F;
      return true;
    case DType::F64:
      break;
  }
  return false;
}

std::int64_t lt_alignment(const void* p, std::int64_t row_bytes, std::int64_t batch_bytes) {
  auto bits = reinterpret_cast<std::uintptr_t>(p) | static_cast<std::uintptr_t>(row_bytes) |
              static_cast<std::uintptr_t>(batch_bytes);
  bits |= 256;
  return static_cast<std::int64_t>(bits & (~bits + 1));
}

cublasLtMatrixLayout_t row_major_layout(std::int64_t type, std::int64_t rows, std::int64_t cols,
                                        std::int64_t ld, std::int64_t batch, std::int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, static_cast<cudaDataType_t>(type),
                                          static_cast<std::uint64_t>(cols),
                                          static_cast<std::uint64_t>(rows), ld));
  if (batch > 1) {
    const auto count = static_cast<std::int32_t>(batch);
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                  &count, sizeof(count)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return layout;
}

void leave_sms(cublasLtMatmulDesc_t desc, std::int64_t margin) {
  if (margin <= 0) return;
  const auto target =
      static_cast<std::int32_t>(std::max<std::int64_t>(1, current_device_sm_count() - margin));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target,
                                              sizeof(target)));
}

}  // namespace tinyllama::cuda
