#include "device/arch/tma_maps.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "core/errors.h"

namespace tinyllama::cuda::arch {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static std::once_flag once;
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess) {
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }
  });
  if (fn == nullptr)
    throw RuntimeFailure("TMA tensor map: the driver has no cuTensorMapEncodeTiled");
  return fn;
}

}  // namespace

CUtensorMap tma_map_2d(const Mat& m, int box_rows) {
  if (m.dtype != DType::BF16 && m.dtype != DType::F16) {
    throw RuntimeFailure("tma_map_2d: bf16 or fp16 only");
  }
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(m.cols), static_cast<cuuint64_t>(m.rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(m.ld) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encoder()(
      &map,
      m.dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      2, m.data, dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw RuntimeFailure("TMA tensor map: cuTensorMapEncodeTiled failed (" + std::to_string(r) +
                         ") for a " + std::to_string(m.rows) + " x " + std::to_string(m.cols) +
                         " matrix");
  }
  return map;
}

}  // namespace tinyllama::cuda::arch
