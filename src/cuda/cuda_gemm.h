#pragma once
// Row-major GEMM on cuBLASLt. cuBLASLt is column-major; a row-major matrix
// is its column-major transpose, so C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T with the operands swapped and no copies.
//
// Compute is always CUBLAS_COMPUTE_32F: true fp32 for fp32 operands (never
// TF32), fp32 accumulation for bf16/fp16 operands. C may be fp32 while A and
// B are bf16/fp16 (weight gradients of AMP training).
//
// Descriptors and the heuristic's algorithm are built once per distinct
// problem and cached, so a training step asks the heuristic nothing after
// its first step (and no host work blocks a later graph capture).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>

#include "core/mat.h"

namespace tinyllama::cuda {

// Element strides between consecutive matrices of a strided batch.
struct BatchStrides {
  int count = 1;
  std::int64_t c = 0, a = 0, b = 0;
};

class GemmRunner {
 public:
  GemmRunner();
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  void set_stream(cudaStream_t stream) { stream_ = stream; }
  void set_workspace(void* p, std::size_t bytes) {
    workspace_ = p;
    workspace_bytes_ = bytes;
  }

  // c = alpha * op(a) * op(b) + beta * c for each matrix of the batch; each
  // Mat describes the first matrix. With beta == 0, c is not read.
  void run(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta,
           BatchStrides batch = {});

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::array<std::int64_t, 20>;
  const Plan& plan_for(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
};

}  // namespace tinyllama::cuda
