// See cuda_gemm.h for the row-major <-> column-major mapping.
#include "cuda/cuda_gemm.h"

#include <string>

#include "cuda/cuda_check.h"
#include "cuda/cuda_common.cuh"

namespace tinyllama::cuda {
namespace {

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F16:
      return CUDA_R_16F;
    case DType::F64:
      break;
  }
  throw RuntimeFailure("gemm: dtype " + std::string(dtype_name(t)) +
                       " is not supported on CUDA (float32, bfloat16 or float16)");
}

// The largest power of two (up to 256) dividing the address of every row of
// every matrix in the batch. cuBLASLt's heuristic otherwise assumes 256-byte
// alignment, and column slices of fused buffers (q/k/v of qkv) can start
// anywhere, with any row stride.
std::int64_t alignment(const void* p, std::int64_t ld, std::int64_t stride_elems, DType t) {
  const auto es = static_cast<std::int64_t>(dtype_size(t));
  auto bits = reinterpret_cast<std::uintptr_t>(p) | static_cast<std::uintptr_t>(ld * es) |
              static_cast<std::uintptr_t>(stride_elems * es);
  bits |= 256;
  return static_cast<std::int64_t>(bits & (~bits + 1));
}

// Column-major layout of a row-major rows x cols matrix: cols x rows, same ld.
cublasLtMatrixLayout_t make_layout(std::int64_t key_type, std::int64_t rows, std::int64_t cols,
                                   std::int64_t ld, std::int64_t batch, std::int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, static_cast<cudaDataType_t>(key_type),
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

// Positions in the plan key.
enum KeyField {
  kM,
  kN,
  kK,
  kTransA,
  kTransB,
  kTypeAB,
  kTypeC,
  kLdA,
  kLdB,
  kLdC,
  kBatch,
  kStrideA,
  kStrideB,
  kStrideC,
  kAlignA,
  kAlignB,
  kAlignC,
  kWorkspace,
  kRowsA,
  kRowsB
};

}  // namespace

GemmRunner::GemmRunner() {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

GemmRunner::~GemmRunner() {
  // Destructors must not throw: errors while tearing down are ignored.
  for (auto& [key, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.desc);
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void GemmRunner::run(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta,
                     BatchStrides batch) {
  const char* name = "gemm";
  const std::int64_t m = trans_a ? a.cols : a.rows;
  const std::int64_t k = trans_a ? a.rows : a.cols;
  const std::int64_t kb = trans_b ? b.cols : b.rows;
  const std::int64_t n = trans_b ? b.rows : b.cols;
  require(k == kb && c.rows == m && c.cols == n, name,
          "shapes do not chain: c " + shape_str(c) + (trans_a ? " = a^T " : " = a ") +
              shape_str(a) + (trans_b ? " * b^T " : " * b ") + shape_str(b));
  require(a.dtype == b.dtype, name, "a and b must share one dtype");
  require(c.dtype == a.dtype || c.dtype == DType::F32, name,
          "c must have a's dtype or float32, got " + shape_str(c));
  require(batch.count >= 1, name, "batch count must be at least 1");
  if (m == 0 || n == 0) return;
  require(k > 0, name, "inner dimension is zero");

  Key key{};
  key[kM] = m;
  key[kN] = n;
  key[kK] = k;
  key[kTransA] = trans_a;
  key[kTransB] = trans_b;
  key[kTypeAB] = lt_type(a.dtype);
  key[kTypeC] = lt_type(c.dtype);
  key[kLdA] = a.ld;
  key[kLdB] = b.ld;
  key[kLdC] = c.ld;
  key[kBatch] = batch.count;
  key[kStrideA] = batch.a;
  key[kStrideB] = batch.b;
  key[kStrideC] = batch.c;
  key[kAlignA] = alignment(a.data, a.ld, batch.a, a.dtype);
  key[kAlignB] = alignment(b.data, b.ld, batch.b, b.dtype);
  key[kAlignC] = alignment(c.data, c.ld, batch.c, c.dtype);
  key[kWorkspace] = static_cast<std::int64_t>(workspace_bytes_);
  key[kRowsA] = a.rows;
  key[kRowsB] = b.rows;
  const Plan& plan = plan_for(key);
  // cuBLASLt's "A" is our b and its "B" is our a (see the header).
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, b.data, plan.a, a.data, plan.b, &beta,
                              c.data, plan.c, c.data, plan.c, &plan.algo, workspace_,
                              workspace_bytes_, stream_));
}

const GemmRunner::Plan& GemmRunner::plan_for(const Key& key) {
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;

  Plan plan;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = key[kTransB] ? CUBLAS_OP_T : CUBLAS_OP_N;  // on our b
  const cublasOperation_t op_b = key[kTransA] ? CUBLAS_OP_T : CUBLAS_OP_N;  // on our a
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  // Stored (un-transposed) row-major shapes: our a is rows_a x (ld-bounded)
  // cols; recover cols from m/k and the transpose flag.
  const std::int64_t a_rows = key[kRowsA];
  const std::int64_t a_cols = key[kTransA] ? key[kM] : key[kK];
  const std::int64_t b_rows = key[kRowsB];
  const std::int64_t b_cols = key[kTransB] ? key[kK] : key[kN];
  plan.a = make_layout(key[kTypeAB], b_rows, b_cols, key[kLdB], key[kBatch], key[kStrideB]);
  plan.b = make_layout(key[kTypeAB], a_rows, a_cols, key[kLdA], key[kBatch], key[kStrideA]);
  plan.c = make_layout(key[kTypeC], key[kM], key[kN], key[kLdC], key[kBatch], key[kStrideC]);

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const auto ws = static_cast<std::uint64_t>(key[kWorkspace]);
  const auto align_a = static_cast<std::uint32_t>(key[kAlignB]);  // cuBLASLt's A is our b
  const auto align_b = static_cast<std::uint32_t>(key[kAlignA]);
  const auto align_c = static_cast<std::uint32_t>(key[kAlignC]);
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  try {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                pref, 1, &result, &found_count));
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (found_count == 0) {
    throw RuntimeFailure("gemm: cuBLASLt has no algorithm for m=" + std::to_string(key[kM]) +
                         " n=" + std::to_string(key[kN]) + " k=" + std::to_string(key[kK]));
  }
  plan.algo = result.algo;
  return plans_.emplace(key, plan).first->second;
}

}  // namespace tinyllama::cuda
