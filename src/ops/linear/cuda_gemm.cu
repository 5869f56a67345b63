// See cuda_gemm.h for the row-major <-> column-major mapping.
#include "ops/linear/cuda_gemm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "device/cuda_check.h"
#include "device/cuda_common.cuh"
#include "device/cuda_env.h"
#include "device/cuda_event_timer.h"
#include "device/cuda_graph.h"
#include "ops/linear/cuda_gemm_search.h"
#include "ops/linear/cuda_gemm_timing.h"
#include "ops/linear/cuda_lt_layout.h"

namespace tinyllama::cuda {
namespace {

cudaDataType_t lt_type(DType t) {
  cudaDataType_t type{};
  if (lt_data_type(t, &type)) return type;
  throw RuntimeFailure("gemm: dtype " + std::string(dtype_name(t)) +
                       " is not supported on CUDA (float32, bfloat16 or float16)");
}

std::int64_t alignment(const void* p, std::int64_t ld, std::int64_t stride_elems, DType t) {
  const auto es = static_cast<std::int64_t>(dtype_size(t));
  return lt_alignment(p, ld * es, stride_elems * es);
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
  kRowsB,
  kScalars,  // bit 0: alpha == 0, bit 1: beta == 0
  kDevice,
  kKeyFields
};

// Autotune: launches per candidate before timing it (cuda_gemm_timing.h).
// Graph timing is for problems whose first candidate times below
// kGraphTimingBelowMs one launch at a time: there it changed the workshop
// step (1-2 %); above it the two ways chose differently within the spread
// (B32 S1024, the GPT-2 size), and the older one is kept.
constexpr int kWarmups = 2;
constexpr float kGraphTimingBelowMs = 0.05f;

const char* type_label(std::int64_t t) {
  switch (static_cast<cudaDataType_t>(t)) {
    case CUDA_R_32F:
      return "f32";
    case CUDA_R_16BF:
      return "bf16";
    case CUDA_R_16F:
      return "f16";
    default:
      return "?";
  }
}

// "algo 21 tile 18 splitK 4" for the verbose log.
std::string algo_label(const cublasLtMatmulAlgo_t& algo) {
  std::int32_t id = -1, splitk = 1;
  std::uint32_t tile = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), nullptr);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile),
                                       nullptr);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                       sizeof(splitk), nullptr);
  return "algo " + std::to_string(id) + " tile " + std::to_string(tile) + " splitK " +
         std::to_string(splitk);
}

}  // namespace

static_assert(kKeyFields == std::tuple_size_v<GemmTuningKey>,
              "GemmTuningKey (cuda_gemm_tuned.h) has one entry per KeyField");

bool gemm_autotune_enabled() {
  return env_flag(std::getenv("TINYLLAMA_GEMM_AUTOTUNE"), true);
}

GemmRunner::GemmRunner() {
  CUDA_CHECK(cudaGetDevice(&device_));
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  // TINYLLAMA_GEMM_AUTOTUNE: unset or on (default), off, or "wide".
  const char* mode = std::getenv("TINYLLAMA_GEMM_AUTOTUNE");
  autotune_ = gemm_autotune_enabled();
  wide_search_ = mode != nullptr && std::strcmp(mode, "wide") == 0;
  verbose_ = env_flag(std::getenv("TINYLLAMA_GEMM_VERBOSE"), false);
  const char* timing = std::getenv("TINYLLAMA_GEMM_TUNE_TIMING");
  graph_timing_ = timing == nullptr || std::strcmp(timing, "events") != 0;
}

void GemmRunner::set_stream(cudaStream_t stream) {
  stream_ = stream;
  timer_.reset();  // its events record on the stream it was made for
}

GemmRunner::~GemmRunner() {
  // Destructors must not throw: errors while tearing down are ignored.
  if (verbose_ && !plans_.empty()) {
    report_workspace_needed("gemm", plans_.size(), workspace_needed());
  }
  for (auto& [key, plan] : plans_) {
    destroy_lt_plan(plan);
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void GemmRunner::run(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta,
                     BatchStrides batch, const Mat* c_in) {
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
  if (c_in != nullptr) {
    require(
        c_in->rows == c.rows && c_in->cols == c.cols && c_in->ld == c.ld && c_in->dtype == c.dtype,
        name, "the accumulated input " + shape_str(*c_in) + " must match c " + shape_str(c));
  }
  const void* c_src = c_in != nullptr ? c_in->data : c.data;
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
  key[kAlignC] =
      std::min(alignment(c.data, c.ld, batch.c, c.dtype), alignment(c_src, c.ld, batch.c, c.dtype));
  key[kWorkspace] = static_cast<std::int64_t>(workspace_bytes_);
  key[kRowsA] = a.rows;
  key[kRowsB] = b.rows;
  key[kScalars] = (alpha == 0.f ? 1 : 0) | (beta == 0.f ? 2 : 0) | (c_src != c.data ? 4 : 0);
  key[kDevice] = device_;
  Plan& plan = plan_for(key);
  if (!plan.settled && !is_capturing(stream_)) tune(plan, key, c, a, b, alpha, beta, c_src);
  CUBLAS_CHECK(launch(plan, plan.algo, a, b, c.data, c_src, alpha, beta));
}

cublasStatus_t GemmRunner::launch(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const Mat& a,
                                  const Mat& b, void* d, const void* c, float alpha, float beta) {
  // cuBLASLt's "A" is our b and its "B" is our a (see the header); C and D
  // share one layout.
  return cublasLtMatmul(handle_, plan.desc, &alpha, b.data, plan.a, a.data, plan.b, &beta, c,
                        plan.c, d, plan.c, &algo, workspace_, workspace_bytes_, stream_);
}

namespace {

// The problem as the autotune's lines name it.
std::string problem_label(const GemmTuningKey& key) {
  return "m=" + std::to_string(key[kM]) + " n=" + std::to_string(key[kN]) +
         " k=" + std::to_string(key[kK]) + (key[kTransA] ? " aT" : " aN") +
         (key[kTransB] ? " bT " : " bN ") + type_label(key[kTypeAB]) + "->" +
         type_label(key[kTypeC]) + " batch=" + std::to_string(key[kBatch]) +
         ((key[kScalars] & 2) ? " beta=0" : " beta!=0");
}

// How the problem's candidates are timed: the first candidate that runs
// decides, graph timing where its launches are short, one at a time
// otherwise.
struct CandidateTiming {
  bool decided = false;
  bool use_graph = false;
};

// One candidate's time per launch after kWarmups launches, or -1 where it
// does not run.
float time_candidate(const std::function<bool()>& once, cudaStream_t stream, EventTimer& timer,
                     bool graph_timing, CandidateTiming& timing) {
  bool ok = true;
  for (int w = 0; w < kWarmups && ok; ++w) ok = once();
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!ok) {
    cudaGetLastError();  // a refused launch leaves no sticky error: clear it
    return -1.f;
  }
  float t = -1.f;
  if (!timing.decided) {
    t = time_launches_one_by_one(once, stream, timer);
    if (t < 0.f) return -1.f;
    timing.decided = true;
    timing.use_graph = graph_timing && t < kGraphTimingBelowMs;
  }
  if (timing.use_graph) t = time_launches_in_graph(once, stream, timer);
  if (t < 0.f) t = time_launches_one_by_one(once, stream, timer);
  return t;
}

// The fastest candidate that ran (times[i] < 0: it did not), or
// times.size() when none did; within 1 % of rank 0 is noise, and rank 0
// (the heuristic's choice) stays.
std::size_t fastest_candidate(const std::vector<float>& times) {
  std::size_t best = times.size();
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (times[i] >= 0.f && (best == times.size() || times[i] < times[best])) best = i;
  }
  if (best != times.size() && times[0] >= 0.f && times[best] > 0.99f * times[0]) best = 0;
  return best;
}

void report_tuned(const std::string& what, const std::vector<float>& times, std::size_t best,
                  bool use_graph, double tune_ms, const std::string& algo) {
  char line[160];
  if (times[0] >= 0.f) {
    std::snprintf(line, sizeof(line), "chosen #%zu %.4f ms vs rank 0 %.4f ms (%.2fx)", best,
                  static_cast<double>(times[best]), static_cast<double>(times[0]),
                  static_cast<double>(times[0] / std::max(times[best], 1e-6f)));
  } else {
    std::snprintf(line, sizeof(line), "chosen #%zu %.4f ms (rank 0 did not run)", best,
                  static_cast<double>(times[best]));
  }
  std::fprintf(stderr, "[gemm autotune] %s: %zu candidates in %.0f ms (%s), %s [%s]\n",
               what.c_str(), times.size(), tune_ms, use_graph ? "graph" : "events", line,
               algo.c_str());
}

}  // namespace

void GemmRunner::tune(Plan& plan, const Key& key, const Mat& c, const Mat& a, const Mat& b,
                      float alpha, float beta, const void* c_in) {
  plan.settled = true;  // one attempt per problem, whatever it finds
  const auto started = std::chrono::steady_clock::now();
  const std::string what = verbose_ ? problem_label(key) : std::string();
  // With beta != 0 in place the candidates accumulate into the scratch,
  // never into c; with a separate input they read c_in and write c, which
  // the real launch overwrites after them.
  void* target = c.data;
  const void* source = c_in;
  if ((key[kScalars] & 2) == 0 && c_in == c.data) {
    const std::int64_t elems =
        (key[kBatch] - 1) * key[kStrideC] + (key[kM] - 1) * key[kLdC] + key[kN];
    const auto bytes = static_cast<std::size_t>(elems) * dtype_size(c.dtype);
    if (scratch_ == nullptr || bytes > scratch_bytes_) {
      if (verbose_) {
        std::fprintf(stderr, "[gemm autotune] %s: c (%zu bytes) exceeds the scratch, rank 0 kept\n",
                     what.c_str(), bytes);
      }
      return;
    }
    target = scratch_;
    source = scratch_;
    // Finite values to accumulate into (the scratch's alignment, 256, is at
    // least c's, so every candidate valid for c is valid here).
    CUDA_CHECK(cudaMemsetAsync(scratch_, 0, bytes, stream_));
  }
  const GemmProblemDesc desc = problem(plan, key);
  std::vector<cublasLtMatmulAlgo_t> candidates = heuristic_algos(desc, kMaxCandidates);
  // The untuned choice (plan.algo, the heuristic's rank 0) is candidate 0.
  if (candidates.empty()) return;
  if (wide_search_) candidates = wide_candidates(desc, candidates, kMaxWideCandidates);
  if (!timer_) timer_ = make_event_timer(gemm_timing_marks(), stream_);
  std::vector<float> times(candidates.size(), -1.f);
  CandidateTiming timing;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const cublasLtMatmulAlgo_t& cand = candidates[i];
    // bf16/fp16 outputs keep fp32 accumulation throughout: no candidate that
    // reduces split-K parts in 16 bits (rank 0, the untuned choice, stays).
    if (i > 0 && key[kTypeC] != CUDA_R_32F && !reduces_in_fp32(cand)) continue;
    const auto once = [&] {
      return launch(plan, cand, a, b, target, source, alpha, beta) == CUBLAS_STATUS_SUCCESS;
    };
    times[i] = time_candidate(once, stream_, *timer_, graph_timing_, timing);
  }
  const std::size_t best = fastest_candidate(times);
  if (best == candidates.size()) {
    if (verbose_) {
      std::fprintf(stderr, "[gemm autotune] %s: no candidate ran, rank 0 kept\n", what.c_str());
    }
    return;  // plan.algo stays the heuristic's rank 0
  }
  plan.algo = candidates[best];
  ++tuned_problems_;
  {
    TunedGemmAlgos& tuned = tuned_gemm_algos();
    const std::lock_guard<std::mutex> lock(tuned.mutex);
    tuned.algos[key] = plan.algo;
  }
  if (verbose_) {
    const double tune_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    report_tuned(what, times, best, timing.use_graph, tune_ms, algo_label(plan.algo));
  }
}

// The store's algorithm for `key`, when it has one: timed by any runner of
// this process, or imported (a checkpoint's, rank 0's).
void GemmRunner::adopt_imported(Plan& plan, const Key& key) {
  TunedGemmAlgos& tuned = tuned_gemm_algos();
  const std::lock_guard<std::mutex> lock(tuned.mutex);
  plan.imports = tuned.imports.load(std::memory_order_relaxed);
  const auto hit = tuned.algos.find(key);
  if (hit != tuned.algos.end()) {
    plan.algo = hit->second;
    plan.settled = true;
  }
}

GemmRunner::Plan& GemmRunner::plan_for(const Key& key) {
  auto found = plans_.find({key, sm_margin_});
  if (found != plans_.end()) {
    Plan& plan = found->second;
    if (autotune_ && plan.imports != tuned_gemm_algos().imports.load(std::memory_order_acquire)) {
      adopt_imported(plan, key);
    }
    return plan;
  }

  Plan plan;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = key[kTransB] ? CUBLAS_OP_T : CUBLAS_OP_N;  // on our b
  const cublasOperation_t op_b = key[kTransA] ? CUBLAS_OP_T : CUBLAS_OP_N;  // on our a
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  leave_sms(plan.desc, sm_margin_);
  // Stored (un-transposed) row-major shapes: our a is rows_a x (ld-bounded)
  // cols; recover cols from m/k and the transpose flag.
  const std::int64_t a_rows = key[kRowsA];
  const std::int64_t a_cols = key[kTransA] ? key[kM] : key[kK];
  const std::int64_t b_rows = key[kRowsB];
  const std::int64_t b_cols = key[kTransB] ? key[kK] : key[kN];
  plan.a = row_major_layout(key[kTypeAB], b_rows, b_cols, key[kLdB], key[kBatch], key[kStrideB]);
  plan.b = row_major_layout(key[kTypeAB], a_rows, a_cols, key[kLdA], key[kBatch], key[kStrideA]);
  plan.c = row_major_layout(key[kTypeC], key[kM], key[kN], key[kLdC], key[kBatch], key[kStrideC]);

  if (autotune_) adopt_imported(plan, key);
  if (!plan.settled) {
    try {
      const std::vector<cublasLtMatmulAlgo_t> ranked = heuristic_algos(problem(plan, key), 1);
      if (ranked.empty()) {
        throw RuntimeFailure("gemm: cuBLASLt has no algorithm for m=" + std::to_string(key[kM]) +
                             " n=" + std::to_string(key[kN]) + " k=" + std::to_string(key[kK]));
      }
      plan.algo = ranked.front();
    } catch (...) {
      destroy_lt_plan(plan);
      throw;
    }
    plan.settled = !autotune_;
  }
  return plans_.emplace(PlanKey{key, sm_margin_}, plan).first->second;
}

std::int64_t GemmRunner::workspace_needed() const {
  return most_workspace_needed(
      plans_, [this](const Plan& p, const PlanKey& k) { return problem(p, k.first); });
}

GemmProblemDesc GemmRunner::problem(const Plan& plan, const Key& key) const {
  GemmProblemDesc p;
  p.handle = handle_;
  p.desc = plan.desc;
  p.a = plan.a;
  p.b = plan.b;
  p.c = plan.c;
  p.type_ab = static_cast<cudaDataType_t>(key[kTypeAB]);
  p.type_c = static_cast<cudaDataType_t>(key[kTypeC]);
  p.align_a = static_cast<std::uint32_t>(key[kAlignB]);  // cuBLASLt's A is our b
  p.align_b = static_cast<std::uint32_t>(key[kAlignA]);
  p.align_c = static_cast<std::uint32_t>(key[kAlignC]);
  p.workspace_bytes = static_cast<std::size_t>(key[kWorkspace]);
  return p;
}

}  // namespace tinyllama::cuda
