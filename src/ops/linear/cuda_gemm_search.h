#pragma once
// The candidate algorithms GEMM autotuning times, beyond the heuristic's
// own ranking.
//
// cuBLASLt's heuristic ranks a few configurations per problem. For true
// fp32 (SIMT kernels) and for problems with few output tiles (N = 512 at
// 1024 tokens: 32 tiles of 128 x 128 on 132 SMs) its picks can be far from
// the fastest configuration the library has. The wide search adds, for every
// algorithm id the library has for the types, the heuristic's best
// configurations of that id (CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID), and then
// split-K variants (fp32 partial sums) of every candidate found so far.
// Every candidate passes cublasLtMatmulAlgoCheck before it is returned.
#include <cublasLt.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tinyllama::cuda {

// One GEMM problem as cuBLASLt sees it (descriptors owned by the caller).
struct GemmProblemDesc {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C (= D)
  cudaDataType_t type_ab = CUDA_R_32F, type_c = CUDA_R_32F;
  std::uint32_t align_a = 256, align_b = 256, align_c = 256;  // bytes
  std::size_t workspace_bytes = 0;
};

// The heuristic's best max_count algorithms in its own order (BEST_FIT), or,
// with only_algo_id >= 0, its best configurations of that one algorithm id.
// Results whose state is not success or whose workspace does not fit are
// dropped; the result may be empty.
std::vector<cublasLtMatmulAlgo_t> heuristic_algos(const GemmProblemDesc& p, int max_count,
                                                  int only_algo_id = -1);

// The workspace bytes cuBLASLt says `algo` needs for this problem, or -1
// where it does not accept the configuration.
std::int64_t algo_workspace_bytes(const GemmProblemDesc& p, const cublasLtMatmulAlgo_t& algo);

// The most workspace the algorithms of a runner's plans (a map from key to
// a plan with an `algo`) need, problem(plan, key) describing each.
template <class Plans, class Describe>
std::int64_t most_workspace_needed(const Plans& plans, Describe problem) {
  std::int64_t most = 0;
  for (const auto& [key, plan] : plans) {
    most = std::max(most, algo_workspace_bytes(problem(plan, key), plan.algo));
  }
  return most;
}

// One line to stderr (TINYLLAMA_GEMM_VERBOSE=1): how much of its workspace
// a runner's chosen algorithms need over its problems.
void report_workspace_needed(const char* runner, std::size_t problems, std::int64_t needed);

// Whether the algorithm adds its split-K partial sums in fp32. INPLACE and
// OUTPUT_TYPE reductions add them in c's dtype: extra bf16/fp16 roundings.
bool reduces_in_fp32(const cublasLtMatmulAlgo_t& algo);

// The wide candidate list: `first` (the heuristic's ranking) in its order,
// then the per-id and split-K additions, without duplicates, at most
// max_count in all.
std::vector<cublasLtMatmulAlgo_t> wide_candidates(const GemmProblemDesc& p,
                                                  const std::vector<cublasLtMatmulAlgo_t>& first,
                                                  std::size_t max_count);

}  // namespace tinyllama::cuda
