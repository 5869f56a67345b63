// See cuda_gemm_search.h.
#include "ops/linear/cuda_gemm_search.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>

#include "device/cuda_check.h"

namespace tinyllama::cuda {
namespace {

// Split-K factors tried on every candidate that supports split-K.
constexpr std::array<std::int32_t, 8> kSplitKs = {1, 2, 3, 4, 6, 8, 12, 16};
// Algorithm ids asked for at most (cuBLAS 13 has a few dozen per type pair).
constexpr int kMaxAlgoIds = 256;
// Configurations per algorithm id from the limited heuristic.
constexpr int kConfigsPerId = 8;

template <typename T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), nullptr);
  return value;
}

// Everything that tells two configurations apart.
using ConfigKey = std::array<std::int64_t, 9>;
ConfigKey config_key(const cublasLtMatmulAlgo_t& algo) {
  return {config<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID),
          config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
          config<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
          config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
          config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
          config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
          config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
          config<std::uint16_t>(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID),
          config<std::uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)};
}

// Whether the library accepts the configuration for this problem, within
// the workspace.
bool runnable(const GemmProblemDesc& p, const cublasLtMatmulAlgo_t& algo) {
  const std::int64_t needed = algo_workspace_bytes(p, algo);
  return needed >= 0 && static_cast<std::size_t>(needed) <= p.workspace_bytes;
}

// Collects candidates in order, without duplicates, up to a limit.
class CandidateList {
 public:
  explicit CandidateList(std::size_t limit) : limit_(limit) {}
  bool full() const { return algos_.size() >= limit_; }
  void add(const cublasLtMatmulAlgo_t& algo) {
    if (full()) return;
    if (seen_.insert(config_key(algo)).second) algos_.push_back(algo);
  }
  const std::vector<cublasLtMatmulAlgo_t>& algos() const { return algos_; }

 private:
  std::size_t limit_;
  std::set<ConfigKey> seen_;
  std::vector<cublasLtMatmulAlgo_t> algos_;
};

}  // namespace

std::int64_t algo_workspace_bytes(const GemmProblemDesc& p, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t result{};
  if (cublasLtMatmulAlgoCheck(p.handle, p.desc, p.a, p.b, p.c, p.c, &algo, &result) !=
          CUBLAS_STATUS_SUCCESS ||
      result.state != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  return static_cast<std::int64_t>(result.workspaceSize);
}

void report_workspace_needed(const char* runner, std::size_t problems, std::int64_t needed) {
  std::fprintf(stderr, "[%s workspace] %zu problems: their algorithms need at most %lld bytes\n",
               runner, problems, static_cast<long long>(needed));
}

bool reduces_in_fp32(const cublasLtMatmulAlgo_t& algo) {
  const auto splitk = config<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  const auto scheme = config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  return splitk <= 1 || scheme == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
}

std::vector<cublasLtMatmulAlgo_t> heuristic_algos(const GemmProblemDesc& p, int max_count,
                                                  int only_algo_id) {
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(max_count));
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  const auto ws = static_cast<std::uint64_t>(p.workspace_bytes);
  auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value));
    }
  };
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_a);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_b);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_c);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_c);
  if (only_algo_id >= 0) {
    // The limited search reads the algorithm id from the result slots.
    const auto mode = static_cast<std::uint32_t>(CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID);
    set(CUBLASLT_MATMUL_PREF_SEARCH_MODE, mode);
    for (auto& r : results) {
      if (status == CUBLAS_STATUS_SUCCESS) {
        status = cublasLtMatmulAlgoInit(p.handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, p.type_ab,
                                        p.type_ab, p.type_c, p.type_c, only_algo_id, &r.algo);
      }
    }
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(p.handle, p.desc, p.a, p.b, p.c, p.c, pref, max_count,
                                            results.data(), &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  // An id the heuristic cannot configure for this problem is not an error.
  if (status != CUBLAS_STATUS_SUCCESS && only_algo_id >= 0) return {};
  CUBLAS_CHECK(status);
  std::vector<cublasLtMatmulAlgo_t> algos;
  for (int i = 0; i < found; ++i) {
    const auto& r = results[static_cast<std::size_t>(i)];
    if (r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= p.workspace_bytes) {
      algos.push_back(r.algo);
    }
  }
  return algos;
}

std::vector<cublasLtMatmulAlgo_t> wide_candidates(const GemmProblemDesc& p,
                                                  const std::vector<cublasLtMatmulAlgo_t>& first,
                                                  std::size_t max_count) {
  CandidateList list(max_count);
  for (const auto& algo : first) list.add(algo);

  std::vector<int> ids(kMaxAlgoIds);
  int id_count = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetIds(p.handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, p.type_ab,
                                        p.type_ab, p.type_c, p.type_c, kMaxAlgoIds, ids.data(),
                                        &id_count));
  for (int i = 0; i < id_count && !list.full(); ++i) {
    for (const auto& algo : heuristic_algos(p, kConfigsPerId, ids[static_cast<std::size_t>(i)])) {
      list.add(algo);
    }
  }

  // Split-K variants of everything so far. Partial sums are added in the
  // compute type (fp32), so a bf16/fp16 output keeps fp32 accumulation.
  const std::vector<cublasLtMatmulAlgo_t> found = list.algos();
  for (const auto& base : found) {
    std::int32_t splitk_support = 0;
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_support,
                                      sizeof(splitk_support), nullptr);
    std::uint32_t schemes = 0;
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                      sizeof(schemes), nullptr);
    if (splitk_support == 0 || (schemes & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) == 0) continue;
    for (const std::int32_t splits : kSplitKs) {
      if (list.full()) break;
      cublasLtMatmulAlgo_t algo = base;
      const std::uint32_t scheme =
          splits > 1 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE;
      if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                               sizeof(splits)) != CUBLAS_STATUS_SUCCESS ||
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                               &scheme, sizeof(scheme)) != CUBLAS_STATUS_SUCCESS) {
        continue;
      }
      if (runnable(p, algo)) list.add(algo);
    }
  }
  return list.algos();
}

}  // namespace tinyllama::cuda
