#pragma once
// Row-major GEMM on cuBLASLt. cuBLASLt is column-major; a row-major matrix
// is its column-major transpose, so C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T with the operands swapped and no copies.
//
// Compute is always CUBLAS_COMPUTE_32F: true fp32 for fp32 operands (never
// TF32), fp32 accumulation for bf16/fp16 operands. C may be fp32 while A and
// B are bf16/fp16 (weight gradients of AMP training).
//
// Descriptors and the algorithm are chosen once per distinct problem and
// cached, so a training step asks the heuristic nothing after its first step
// (and no host work blocks a later graph capture).
//
// Autotuning (on by default; env TINYLLAMA_GEMM_AUTOTUNE=0 turns it off): at
// a problem's first use outside a stream capture, up to kMaxCandidates of
// the heuristic's algorithms are timed with CUDA events on the stream (one
// launch at a time, or in a graph of launches where they are short:
// cuda_gemm_timing.h) and the fastest is kept (the heuristic's rank 0 for fp32 is often a slow
// align1 SIMT kernel with a split-K reduction). Candidates with beta == 0
// run into the real c (c is not read, and the chosen algorithm runs once
// more last); with beta != 0 they run into the autotune scratch, and a
// problem whose c does not fit there keeps rank 0. Inside a capture nothing
// is timed: the cached choice, or rank 0 for a new problem (tuned at its
// next eager use). For bf16/fp16 outputs, candidates other than rank 0 that
// add split-K partial sums in 16 bits are skipped (fp32 accumulation stays).
// TINYLLAMA_GEMM_AUTOTUNE=wide times a wider list (cuda_gemm_search.h).
// Choices are shared process-wide (per device), so two
// backends in one process run the same algorithms and agree bit for bit.
// TINYLLAMA_GEMM_VERBOSE=1 prints one line per tuned problem to stderr.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/mat.h"
#include "ops/linear/cuda_gemm_search.h"
#include "ops/linear/cuda_gemm_tuned.h"

namespace tinyllama {
class EventTimer;  // model/backend.h
}  // namespace tinyllama

namespace tinyllama::cuda {

// Element strides between consecutive matrices of a strided batch.
struct BatchStrides {
  int count = 1;
  std::int64_t c = 0, a = 0, b = 0;
};

// Whether GEMM autotuning is on for this process: TINYLLAMA_GEMM_AUTOTUNE
// unset, "on" or "wide" (every GemmRunner starts with it).
bool gemm_autotune_enabled();

class GemmRunner {
 public:
  GemmRunner();
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  void set_stream(cudaStream_t stream);
  void set_workspace(void* p, std::size_t bytes) {
    workspace_ = p;
    workspace_bytes_ = bytes;
  }
  // Where accumulating (beta != 0) problems are timed; none: they keep rank 0.
  void set_autotune_scratch(void* p, std::size_t bytes) {
    scratch_ = p;
    scratch_bytes_ = bytes;
  }
  // Initially from TINYLLAMA_GEMM_AUTOTUNE (anything but 0/off/false/no: on).
  // Off: every new problem takes the heuristic's rank 0.
  void set_autotune(bool on) { autotune_ = on; }
  bool autotune() const { return autotune_; }
  // Problems this runner has chosen an algorithm for by timing.
  int tuned_problems() const { return tuned_problems_; }
  // The most workspace the algorithms this runner runs need (the chosen
  // ones; rank 0 where a problem is not tuned yet): the workspace could be
  // that small without changing a choice. TINYLLAMA_GEMM_VERBOSE=1 prints
  // it when the runner is destroyed.
  std::int64_t workspace_needed() const;
  // Drops the process-wide choices (tests): a runner created later times
  // each problem again at its first use.
  static void forget_tuned_choices();
  // The process-wide choices as text (the library version, the GPU's name,
  // then one line per problem: its key and the algorithm's bytes), and
  // their restoration: a resumed run reruns the algorithms its checkpoint
  // was trained with, so it rounds exactly as the uninterrupted run (a
  // choice by timing can differ from process to process). import returns ""
  // or, when the text was made by another library version or GPU, or is
  // damaged, why nothing was restored.
  static std::string export_tuned_choices();
  static std::string import_tuned_choices(const std::string& text);

  // SMs that the GEMMs issued from now on leave to a kernel running beside
  // them: a data-parallel step's gradient exchange (CudaBackend sets it
  // while one runs). cuBLASLt's persistent kernels size their grid to the
  // SMs they target (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET); a grid of every
  // SM beside a kernel that holds some waits for them with part of its
  // tiles. 0 (the default): every SM. Each margin has its own plans, made
  // at first use and kept; the tuned algorithms are shared.
  void set_sm_margin(int sms) { sm_margin_ = sms > 0 ? sms : 0; }
  int sm_margin() const { return sm_margin_; }

  // Whether tuning times the wide candidate list (cuda_gemm_search.h) rather
  // than the heuristic's ranking alone. Initially on when
  // TINYLLAMA_GEMM_AUTOTUNE=wide.
  void set_wide_search(bool on) { wide_search_ = on; }
  bool wide_search() const { return wide_search_; }

  static constexpr int kMaxCandidates = 16;
  static constexpr std::size_t kMaxWideCandidates = 512;

  // c = alpha * op(a) * op(b) + beta * c for each matrix of the batch; each
  // Mat describes the first matrix. With beta == 0, c is not read. With
  // c_in (same shape, dtype and ld as c), the accumulated term is read from
  // c_in instead: c = alpha * op(a) * op(b) + beta * c_in, c_in untouched.
  void run(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta,
           BatchStrides batch = {}, const Mat* c_in = nullptr);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool settled = false;       // false: rank 0 for now, to be timed at an eager use
    std::uint64_t imports = 0;  // TunedGemmAlgos::imports when algo was last looked up
  };
  using Key = GemmTuningKey;
  // A plan is made for a problem and the SMs it leaves (sm_margin_).
  using PlanKey = std::pair<Key, int>;
  Plan& plan_for(const Key& key);
  void adopt_imported(Plan& plan, const Key& key);
  GemmProblemDesc problem(const Plan& plan, const Key& key) const;
  // d = alpha * op(a) * op(b) + beta * c; c == d in place.
  cublasStatus_t launch(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const Mat& a,
                        const Mat& b, void* d, const void* c, float alpha, float beta);
  void tune(Plan& plan, const Key& key, const Mat& c, const Mat& a, const Mat& b, float alpha,
            float beta, const void* c_in);

  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  bool autotune_ = true;
  int sm_margin_ = 0;
  bool wide_search_ = false;
  bool verbose_ = false;
  bool graph_timing_ =
      true;  // TINYLLAMA_GEMM_TUNE_TIMING: graph (default: short problems) or events
  int tuned_problems_ = 0;
  std::unique_ptr<EventTimer> timer_;  // autotune timing, created at first use
  std::map<PlanKey, Plan> plans_;
};

}  // namespace tinyllama::cuda
