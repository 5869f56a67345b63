// See cuda_gemm_fp8.h for the layout (the operand swap that makes
// row-major A . B^T cuBLASLt's "TN" case) and cuBLASLt's FP8 rules.
#include "ops/linear/cuda_gemm_fp8.h"
#include <algorithm>

#include <string>
#include <vector>

#include "core/errors.h"
#include "device/cuda_check.h"
#include "device/cuda_env.h"
#include "ops/linear/cuda_gemm_search.h"
#include "ops/linear/cuda_lt_layout.h"

namespace tinyllama::cuda {
namespace {

// Positions in the plan key.
enum Fp8KeyField {
  kM,
  kN,
  kK,
  kLdA,
  kLdB,
  kLdC,
  kFormatA,  // cudaDataType_t
  kFormatB,
  kTypeC,
  kAccumulate,
  kFastAccum,
  kPointers,  // bit 1: a's dequant, bit 2: b's dequant
  kAlignA,
  kAlignB,
  kAlignC,
  kWorkspace,
  kDevice,
  kSmMargin,
  kFp8KeyFields
};

// The heuristic's candidates looked at for one whose split-K parts are
// added in fp32.
constexpr int kCandidates = 8;
// cuBLASLt's FP8 alignment: pointers, strides and (here) dimensions.
constexpr std::int64_t kFp8Multiple = 16;

cudaDataType_t fp8_type(Fp8Format f) {
  return f == Fp8Format::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

const char* format_name(Fp8Format f) {
  return f == Fp8Format::E4M3 ? "E4M3" : "E5M2";
}

// c's cuBLASLt type, or CUDA_R_8I (never an FP8 output here) when refused.
cudaDataType_t output_type(DType t) {
  cudaDataType_t type{};
  return lt_data_type(t, &type) ? type : CUDA_R_8I;
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

std::string dims_error(const Mat& c, const Fp8Operand& a, const Fp8Operand& b) {
  const std::int64_t m = a.rows, n = b.rows, k = a.cols;
  if (b.cols != k || c.rows != m || c.cols != n) {
    return "shapes do not chain: c [" + std::to_string(c.rows) + ", " + std::to_string(c.cols) +
           "] = a [" + std::to_string(a.rows) + ", " + std::to_string(a.cols) + "] . b [" +
           std::to_string(b.rows) + ", " + std::to_string(b.cols) + "]^T";
  }
  if (m <= 0 || n <= 0 || k <= 0 || m % kFp8Multiple != 0 || n % kFp8Multiple != 0 ||
      k % kFp8Multiple != 0) {
    return "M, N and K must be positive multiples of 16 for cuBLASLt's FP8 kernels, got M=" +
           std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
  }
  return "";
}

std::string layout_error(const Mat& c, const Fp8Operand& a, const Fp8Operand& b) {
  const auto misaligned = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % kFp8Multiple != 0;
  };
  if (a.ld < a.cols || b.ld < b.cols || c.ld < c.cols) return "a row stride is below its width";
  if (a.ld % kFp8Multiple != 0 || b.ld % kFp8Multiple != 0) {
    return "the FP8 operands' row strides must be multiples of 16 codes, got lda=" +
           std::to_string(a.ld) + " ldb=" + std::to_string(b.ld);
  }
  if (c.ld * static_cast<std::int64_t>(dtype_size(c.dtype)) % kFp8Multiple != 0) {
    return "c's row stride must be a multiple of 16 bytes, got ldc=" + std::to_string(c.ld) + " " +
           std::string(dtype_name(c.dtype));
  }
  if (a.codes == nullptr || b.codes == nullptr || c.data == nullptr) return "a null pointer";
  if (misaligned(a.codes) || misaligned(b.codes) || misaligned(c.data)) {
    return "a, b and c must start on 16-byte boundaries";
  }
  // cuBLASLt answers "not supported" at the matmul otherwise (H200, CUDA 13).
  if ((a.dequant != nullptr && misaligned(a.dequant)) ||
      (b.dequant != nullptr && misaligned(b.dequant))) {
    return "the dequantisation factors must sit on 16-byte boundaries";
  }
  return "";
}

}  // namespace

static_assert(kFp8KeyFields == std::tuple_size_v<std::array<std::int64_t, 18>>,
              "Fp8GemmRunner::Key has one entry per Fp8KeyField");

bool fp8_gemm_supported(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major > 8 || (major == 8 && minor >= 9);
}

std::string fp8_gemm_problem_error(const Mat& c, const Fp8Operand& a, const Fp8Operand& b) {
  if (output_type(c.dtype) == CUDA_R_8I) {
    return "c must be bfloat16, float16 or float32, got " + std::string(dtype_name(c.dtype));
  }
  if (a.format == Fp8Format::E5M2 && b.format == Fp8Format::E5M2) {
    return "cuBLASLt has no E5M2 x E5M2 FP8 GEMM (one operand must be E4M3)";
  }
  std::string why = dims_error(c, a, b);
  return why.empty() ? layout_error(c, a, b) : why;
}

Fp8GemmRunner::Fp8GemmRunner() {
  CUDA_CHECK(cudaGetDevice(&device_));
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  verbose_ = env_flag(std::getenv("TINYLLAMA_GEMM_VERBOSE"), false);
}

Fp8GemmRunner::~Fp8GemmRunner() {
  // Destructors must not throw: errors while tearing down are ignored.
  if (verbose_ && !plans_.empty()) {
    report_workspace_needed("gemm_fp8", plans_.size(), workspace_needed());
  }
  for (auto& [key, plan] : plans_) {
    destroy_lt_plan(plan);
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void Fp8GemmRunner::run(const Mat& c, const Fp8Operand& a, const Fp8Operand& b,
                        const Fp8GemmOptions& options) {
  const std::string why = fp8_gemm_problem_error(c, a, b);
  if (!why.empty()) {
    throw RuntimeFailure("gemm_fp8 (" + std::string(format_name(a.format)) + " x " +
                         format_name(b.format) + " -> " + std::string(dtype_name(c.dtype)) +
                         "): " + why);
  }
  const Plan& plan = plan_for(key_for(c, a, b, options), options, a, b);
  set_pointers(plan, a, b);
  const float alpha = 1.0f;
  const float beta = options.accumulate ? 1.0f : 0.0f;
  // cuBLASLt's A is our b and its B is our a (see the header); C and D
  // share one layout, and one buffer unless the caller adds another.
  const void* addend = options.addend != nullptr ? options.addend : c.data;
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, b.codes, plan.a, a.codes, plan.b, &beta,
                              addend, plan.c, c.data, plan.c, &plan.algo, workspace_,
                              workspace_bytes_, stream_));
}

Fp8GemmRunner::Key Fp8GemmRunner::key_for(const Mat& c, const Fp8Operand& a, const Fp8Operand& b,
                                          const Fp8GemmOptions& options) const {
  Key key{};
  key[kM] = a.rows;
  key[kN] = b.rows;
  key[kK] = a.cols;
  key[kLdA] = a.ld;
  key[kLdB] = b.ld;
  key[kLdC] = c.ld;
  key[kFormatA] = fp8_type(a.format);
  key[kFormatB] = fp8_type(b.format);
  key[kTypeC] = output_type(c.dtype);
  key[kAccumulate] = options.accumulate;
  key[kFastAccum] = options.fast_accum;
  key[kPointers] = (a.dequant != nullptr ? 2 : 0) | (b.dequant != nullptr ? 4 : 0);
  key[kAlignA] = lt_alignment(a.codes, a.ld);
  key[kAlignB] = lt_alignment(b.codes, b.ld);
  const std::int64_t row_bytes = c.ld * static_cast<std::int64_t>(dtype_size(c.dtype));
  key[kAlignC] = lt_alignment(c.data, row_bytes);
  if (options.addend != nullptr) {  // C's alignment too: the algorithm must suit both
    key[kAlignC] = std::min(key[kAlignC], lt_alignment(options.addend, row_bytes));
  }
  key[kWorkspace] = static_cast<std::int64_t>(workspace_bytes_);
  key[kDevice] = device_;
  key[kSmMargin] = std::max(0, options.sm_margin);
  return key;
}

// The scale pointers of this call on the plan's descriptor (no amax of D:
// cuBLASLt 13 refuses CUBLASLT_MATMUL_DESC_AMAX_D_POINTER with a bf16 or
// fp32 D, measured on an H200). The
// descriptor is the runner's own, and cuBLASLt reads it when the matmul is
// enqueued, so the next call may change them.
void Fp8GemmRunner::set_pointers(const Plan& plan, const Fp8Operand& a, const Fp8Operand& b) {
  set_attr(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b.dequant);  // cuBLASLt's A: our b
  set_attr(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a.dequant);
}

Fp8GemmRunner::Plan& Fp8GemmRunner::plan_for(const Key& key, const Fp8GemmOptions& options,
                                             const Fp8Operand& a, const Fp8Operand& b) {
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;
  Plan plan;
  try {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_attr(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);  // on our b: the "T" of TN
    set_attr(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);  // on our a
    set_attr(plan.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
             static_cast<std::int8_t>(options.fast_accum ? 1 : 0));
    leave_sms(plan.desc, key[kSmMargin]);
    // The heuristic sees the scale pointers set as the launches will.
    set_pointers(plan, a, b);
    plan.a = row_major_layout(key[kFormatB], key[kN], key[kK], key[kLdB]);  // our b, [N, K]
    plan.b = row_major_layout(key[kFormatA], key[kM], key[kK], key[kLdA]);  // our a, [M, K]
    plan.c = row_major_layout(key[kTypeC], key[kM], key[kN], key[kLdC]);
    choose_algo(plan, key);
  } catch (...) {
    destroy_lt_plan(plan);
    throw;
  }
  return plans_.emplace(key, plan).first->second;
}

std::int64_t Fp8GemmRunner::workspace_needed() const {
  return most_workspace_needed(plans_,
                               [this](const Plan& p, const Key& k) { return problem(p, k); });
}

GemmProblemDesc Fp8GemmRunner::problem(const Plan& plan, const Key& key) const {
  GemmProblemDesc p;
  p.handle = handle_;
  p.desc = plan.desc;
  p.a = plan.a;
  p.b = plan.b;
  p.c = plan.c;
  p.type_ab = static_cast<cudaDataType_t>(key[kFormatB]);  // used only by the per-id search
  p.type_c = static_cast<cudaDataType_t>(key[kTypeC]);
  p.align_a = static_cast<std::uint32_t>(key[kAlignB]);  // cuBLASLt's A is our b
  p.align_b = static_cast<std::uint32_t>(key[kAlignA]);
  p.align_c = static_cast<std::uint32_t>(key[kAlignC]);
  p.workspace_bytes = static_cast<std::size_t>(key[kWorkspace]);
  return p;
}

// The heuristic's best candidate that adds split-K parts (if any) in fp32,
// or its rank 0 when none does.
void Fp8GemmRunner::choose_algo(Plan& plan, const Key& key) {
  const std::vector<cublasLtMatmulAlgo_t> ranked = heuristic_algos(problem(plan, key), kCandidates);
  if (ranked.empty()) {
    throw RuntimeFailure("gemm_fp8: cuBLASLt has no FP8 algorithm for m=" +
                         std::to_string(key[kM]) + " n=" + std::to_string(key[kN]) +
                         " k=" + std::to_string(key[kK]) + " (needs an sm_89 or newer GPU)");
  }
  plan.algo = ranked.front();
  for (const cublasLtMatmulAlgo_t& algo : ranked) {
    if (reduces_in_fp32(algo)) {
      plan.algo = algo;
      return;
    }
  }
}

}  // namespace tinyllama::cuda
