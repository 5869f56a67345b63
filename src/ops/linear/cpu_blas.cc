// fp32 GEMMs through OpenBLAS's cblas_sgemm (row-major, any row stride).
//
// OpenBLAS runs single-threaded here and tinyllama splits each GEMM over its
// own threads (parallel_for, one sgemm per block of rows or columns of c):
// OpenBLAS's own worker threads spin for a while after every call, which
// starved the threads of the elementwise ops and the attention that run
// between the GEMMs (the 2-core machine lost ~30 % of a step to it). Shapes
// BLAS cannot take as they are (an empty inner dimension, a row stride of
// 0) go to the reference loops, which handle them exactly.
#include "ops/linear/cpu_blas.h"

#include <cblas.h>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>

#include "cpu/cpu_common.h"
#include "ops/linear/cpu_blas_kernels.h"
#include "ops/linear/cpu_gemm.h"

namespace tinyllama::cpu {
namespace {

int blas_int(std::int64_t v, const char* what) {
  require(v >= 0 && v <= INT_MAX, "gemm",
          std::string(what) + " " + std::to_string(v) + " exceeds the BLAS integer range");
  return static_cast<int>(v);
}

void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void sgemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) {
  const std::int64_t k = trans_a ? a.rows : a.cols;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, blas_int(c.rows, "m"), blas_int(c.cols, "n"),
              blas_int(k, "k"), alpha, a.ptr<float>(), blas_int(a.ld, "lda"), b.ptr<float>(),
              blas_int(b.ld, "ldb"), beta, c.ptr<float>(), blas_int(c.ld, "ldc"));
}

// Rows [r0, r0+n) of op(m) / columns [c0, c0+n) of op(m), as views of m.
Mat op_rows(const Mat& m, bool trans, std::int64_t r0, std::int64_t n) {
  return trans ? m.col_block(r0, n) : m.row_block(r0, n);
}
Mat op_cols(const Mat& m, bool trans, std::int64_t c0, std::int64_t n) {
  return trans ? m.row_block(c0, n) : m.col_block(c0, n);
}

void check_blas_args(const std::string& op, const Mat& c, const Mat& a, bool trans_a, const Mat& b,
                     bool trans_b) {
  check_gemm_args(op, c, a, trans_a, b, trans_b);
  common_dtype(op, {c, a, b});
  require(c.dtype == DType::F32, op,
          "the BLAS path takes float32 only, got " + std::string(dtype_name(c.dtype)));
}

}  // namespace

bool blas_available() {
  return true;
}

std::string blas_description() {
  // OPENBLAS_VERSION reads " OpenBLAS 0.3.21 ".
  std::string version = OPENBLAS_VERSION;
  const auto first = version.find_first_not_of(' ');
  const auto last = version.find_last_not_of(' ');
  version = first == std::string::npos ? "OpenBLAS" : version.substr(first, last - first + 1);
  std::string out = version + ", " + openblas_get_corename() + " kernels";
  // Set by use_best_blas_kernels before it re-executed the process.
  if (const char* fallback = std::getenv("TINYLLAMA_BLAS_FALLBACK")) {
    out += std::string(" (OPENBLAS_CORETYPE set by tinyllama: OpenBLAS took ") + fallback +
           " on this CPU)";
  }
  return out;
}

void use_best_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's, or ours
  const std::string chosen = openblas_get_corename();
  const std::string better = better_blas_core(chosen, this_cpu());
  if (better.empty()) return;
  ::setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  ::setenv("TINYLLAMA_BLAS_FALLBACK", chosen.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // Still here: the run goes on with the kernels OpenBLAS chose.
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv("TINYLLAMA_BLAS_FALLBACK");
}

void blas_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) {
  check_blas_args("gemm", c, a, trans_a, b, trans_b);
  single_threaded_blas();
  const std::int64_t k = trans_a ? a.rows : a.cols;
  if (c.rows == 0 || c.cols == 0) return;
  if (k == 0 || a.ld == 0 || b.ld == 0) {
    gemm(c, a, trans_a, b, trans_b, alpha, beta);
    return;
  }
  // One sgemm per thread, on a block of c's rows (or columns, when c is wide).
  const double flops_per_line = 2.0 * static_cast<double>(k);
  if (c.rows >= c.cols) {
    parallel_for(c.rows, flops_per_line * static_cast<double>(c.cols),
                 [&](std::int64_t r0, std::int64_t r1) {
                   if (r1 > r0)
                     sgemm(c.row_block(r0, r1 - r0), op_rows(a, trans_a, r0, r1 - r0), trans_a, b,
                           trans_b, alpha, beta);
                 });
  } else {
    parallel_for(c.cols, flops_per_line * static_cast<double>(c.rows),
                 [&](std::int64_t c0, std::int64_t c1) {
                   if (c1 > c0)
                     sgemm(c.col_block(c0, c1 - c0), a, trans_a, op_cols(b, trans_b, c0, c1 - c0),
                           trans_b, alpha, beta);
                 });
  }
}

void blas_gemm_serial(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) {
  check_blas_args("gemm", c, a, trans_a, b, trans_b);
  single_threaded_blas();
  const std::int64_t k = trans_a ? a.rows : a.cols;
  if (c.rows == 0 || c.cols == 0) return;
  if (k == 0 || a.ld == 0 || b.ld == 0) {
    gemm(c, a, trans_a, b, trans_b, alpha, beta);
    return;
  }
  sgemm(c, a, trans_a, b, trans_b, alpha, beta);
}

}  // namespace tinyllama::cpu
