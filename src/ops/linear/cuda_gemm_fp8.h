#pragma once
// Row-major FP8 GEMM on cuBLASLt (issue 45), the device twin of
// cpu::gemm_fp8_reference (cpu_fp8.h), with its convention:
//
//   C[M, N] = (A[M, K] . B[N, K]^T) * dequant_a * dequant_b   (+ C)
//
// A and B are FP8 codes, row-major, both K-contiguous; dequant_* are the
// per-tensor dequantisation factors (1 / scale, fp32 scalars on the device:
// fp8_scale_from_amax's inverse_scale). C is bf16, fp16 or fp32, row-major.
// The three passes of a Linear y = x W^T map onto it as
//   forward     y[T, out]   = x[T, in]     . W[out, in]^T       a = x,    b = W
//   input grad  dx[T, in]   = dy[T, out]   . (W^T)[in, out]^T   a = dy,   b = W^T
//   weight grad dW[out, in] = (dy^T)[out, T] . (x^T)[in, T]^T   a = dy^T, b = x^T
// so the backward needs the transposed copies fp8_cast_transpose makes.
//
// The layout. Hopper's (and Ada's) cuBLASLt runs FP8 only as "TN": in its
// column-major terms, op(A) = A^T and op(B) = B, i.e. both stored operands
// have K as their leading (contiguous) dimension. As for GemmRunner
// (cuda_gemm.h), a row-major matrix is its column-major transpose, and
// C = A B^T is computed as C^T = B A^T with the operands swapped:
//   - C^T is column-major N x M with ld = ldc: exactly C's row-major storage;
//   - cuBLASLt's A is our B: stored column-major K x N (ld = ldb, K
//     contiguous), used transposed (TRANSA = T) to give the N x K factor;
//   - cuBLASLt's B is our A: stored column-major K x M (ld = lda, K
//     contiguous), used as is (TRANSB = N) as the K x M factor.
// That is the TN case, so no copy is needed; cuBLASLt's A scale pointer
// takes our b's factor and its B scale pointer our a's.
//
// cuBLASLt's rules for FP8 on sm_89/sm_90 (cuBLAS docs, cublasLtMatmul):
//   - compute type CUBLAS_COMPUTE_32F, scale type CUDA_R_32F;
//   - input pairs E4M3 x E4M3, E4M3 x E5M2, E5M2 x E4M3 (never E5M2 x E5M2);
//   - C/D types used here: bf16 (C = D = bf16), fp16, fp32 (C = D = fp32);
//     FP8 outputs (D = E4M3/E5M2 with a D scale) exist but are not used;
//   - A_SCALE_POINTER / B_SCALE_POINTER: device fp32 scalars multiplied into
//     the product (D = alpha * sa * sb * op(A) op(B) + beta * C for a
//     non-FP8 C/D; C/D scale pointers apply only to FP8 C/D);
//   - 16-byte aligned pointers and leading dimensions (16 codes for A/B).
// This runner also asks M, N and K to be multiples of 16 (the brief's and
// PyTorch's _scaled_mm's rule; cuBLASLt may accept some other M/N, but
// the FP8 linear layers never need them) and refuses everything else with
// the reason.
//
// Accumulation. Compute is fp32, but on Hopper the FP8 tensor-core MMA adds
// its products with reduced precision (about 14 significant bits, as
// DeepSeek-V3 measured on H800); cuBLASLt promotes the partial sums into
// fp32 every few MMAs. CUBLASLT_MATMUL_DESC_FAST_ACCUM turns that promotion
// off (faster, less accurate: the running sum itself stays in the tensor
// core). Off by default; Transformer Engine turns it on for the forward
// GEMM only, never for the gradients' (dgrad, wgrad): fast_accum is the
// caller's choice per GEMM.
//
// Descriptors and the algorithm (the heuristic's best whose split-K parts,
// if any, are added in fp32) are made once per distinct problem and cached,
// as GemmRunner does; the scale pointers are set on the cached
// descriptor at each call (host work only, so a graph capture records
// them). No autotuning yet: the heuristic's choice is kept.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "core/mat.h"
#include "ops/linear/cuda_gemm_search.h"
#include "ops/linear/fp8_format.h"

namespace tinyllama::cuda {

// One FP8 operand: rows x cols codes, row-major, row r at codes + r * ld.
struct Fp8Operand {
  const void* codes = nullptr;  // device, 16-byte aligned
  std::int64_t rows = 0;
  std::int64_t cols = 0;  // K
  std::int64_t ld = 0;    // codes (bytes) between rows: >= cols, a multiple of 16
  Fp8Format format = Fp8Format::E4M3;
  const float* dequant = nullptr;  // device fp32 1 / scale; null: 1
};

struct Fp8GemmOptions {
  // c += product (beta = 1: c is read); otherwise c is overwritten unread.
  bool accumulate = false;
  // With accumulate: the term added is read from here instead of c (a
  // matrix of c's shape, dtype and row stride; cuBLASLt's C, c being its
  // D), so that c = product + addend needs no copy of the addend first.
  const void* addend = nullptr;
  // CUBLASLT_MATMUL_DESC_FAST_ACCUM: no periodic promotion to fp32.
  bool fast_accum = false;
  // SMs left to a kernel running beside this GEMM (a data-parallel step's
  // gradient reduce-scatter): cuBLASLt's grid is sized to the others
  // (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), as GemmRunner::set_sm_margin
  // does for the 16-bit GEMMs. 0: every SM.
  int sm_margin = 0;
};

// Whether `device` has FP8 tensor cores (sm_89 or newer).
bool fp8_gemm_supported(int device);

// "" when cuBLASLt's FP8 GEMM (as this runner drives it) can compute
// c = a . b^T, else why not: shapes that do not chain, an unsupported
// format pair or output dtype, a dimension, stride or pointer that breaks
// the 16-multiple and 16-byte rules.
std::string fp8_gemm_problem_error(const Mat& c, const Fp8Operand& a, const Fp8Operand& b);

class Fp8GemmRunner {
 public:
  Fp8GemmRunner();
  ~Fp8GemmRunner();
  Fp8GemmRunner(const Fp8GemmRunner&) = delete;
  Fp8GemmRunner& operator=(const Fp8GemmRunner&) = delete;

  void set_stream(cudaStream_t stream) { stream_ = stream; }
  // As GemmRunner's: the algorithm is chosen among those that fit.
  void set_workspace(void* p, std::size_t bytes) {
    workspace_ = p;
    workspace_bytes_ = bytes;
  }
  // Distinct problems seen (plans made) so far.
  int plans() const { return static_cast<int>(plans_.size()); }
  // As GemmRunner's: the most workspace the chosen algorithms need.
  std::int64_t workspace_needed() const;

  // c[M, N] = a[M, K] . b[N, K]^T * (*a.dequant) * (*b.dequant), plus c's
  // old value with options.accumulate. Throws RuntimeFailure with
  // fp8_gemm_problem_error's reason for a problem it cannot run.
  void run(const Mat& c, const Fp8Operand& a, const Fp8Operand& b,
           const Fp8GemmOptions& options = {});

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C (= D)
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::array<std::int64_t, 18>;  // cuda_gemm_fp8.cc's Fp8KeyField order
  Key key_for(const Mat& c, const Fp8Operand& a, const Fp8Operand& b,
              const Fp8GemmOptions& options) const;
  Plan& plan_for(const Key& key, const Fp8GemmOptions& options, const Fp8Operand& a,
                 const Fp8Operand& b);
  void choose_algo(Plan& plan, const Key& key);
  GemmProblemDesc problem(const Plan& plan, const Key& key) const;
  void set_pointers(const Plan& plan, const Fp8Operand& a, const Fp8Operand& b);

  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  bool verbose_ = false;  // TINYLLAMA_GEMM_VERBOSE
  std::map<Key, Plan> plans_;
};

}  // namespace tinyllama::cuda
