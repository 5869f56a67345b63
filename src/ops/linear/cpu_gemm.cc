// c = alpha * op(a) * op(b) + beta * c on the CPU.
//
// Every element of c is one dot product summed in double in increasing k,
// whatever the thread count or tiling, so the result is deterministic and
// accurate enough to be the reference the GPU GEMMs are checked against.
// The loop order is i-k-j over a tile of rows and columns: the inner loop
// streams a contiguous row of op(b) into independent accumulators, which
// vectorises without reassociating any sum.
#include <algorithm>
#include <vector>

#include "cpu/cpu_common.h"
#include "ops/linear/cpu_gemm.h"

namespace tinyllama::cpu {
namespace {

constexpr std::int64_t kRowTile = 8;  // rows of c sharing each loaded row of op(b)
constexpr std::int64_t kColTile =
    256;  // accumulators per row: kRowTile*kColTile doubles stay in L1

// Element (i, j) of op(m).
template <typename T>
double op_at(const Mat& m, bool trans, std::int64_t i, std::int64_t j) {
  return trans ? static_cast<double>(row<T>(m, j)[i]) : static_cast<double>(row<T>(m, i)[j]);
}

template <typename T>
void gemm_impl(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, double alpha, double beta) {
  const std::int64_t m = c.rows;
  const std::int64_t n = c.cols;
  const std::int64_t k = trans_a ? a.rows : a.cols;

  // op(b) packed once as a contiguous [k, n] block of doubles, so the inner
  // loop reads it with unit stride whichever way b is stored.
  std::vector<double> bp(static_cast<std::size_t>(k * n));
  for (std::int64_t kk = 0; kk < k; ++kk) {
    for (std::int64_t j = 0; j < n; ++j) bp[kk * n + j] = op_at<T>(b, trans_b, kk, j);
  }

  const std::int64_t row_tiles = (m + kRowTile - 1) / kRowTile;
  parallel_for(row_tiles, 2.0 * kRowTile * static_cast<double>(k * n),
               [&](std::int64_t t0, std::int64_t t1) {
                 std::vector<double> ap(static_cast<std::size_t>(kRowTile * k));
                 std::vector<double> acc(static_cast<std::size_t>(kRowTile * kColTile));
                 for (std::int64_t t = t0; t < t1; ++t) {
                   const std::int64_t i0 = t * kRowTile;
                   const std::int64_t rows = std::min(kRowTile, m - i0);
                   for (std::int64_t r = 0; r < rows; ++r) {
                     for (std::int64_t kk = 0; kk < k; ++kk)
                       ap[r * k + kk] = op_at<T>(a, trans_a, i0 + r, kk);
                   }
                   for (std::int64_t j0 = 0; j0 < n; j0 += kColTile) {
                     const std::int64_t cols = std::min(kColTile, n - j0);
                     std::fill(acc.begin(), acc.end(), 0.0);
                     for (std::int64_t kk = 0; kk < k; ++kk) {
                       const double* bk = bp.data() + kk * n + j0;
                       for (std::int64_t r = 0; r < rows; ++r) {
                         const double ar = ap[r * k + kk];
                         double* acc_r = acc.data() + r * kColTile;
                         for (std::int64_t j = 0; j < cols; ++j) acc_r[j] += ar * bk[j];
                       }
                     }
                     for (std::int64_t r = 0; r < rows; ++r) {
                       T* cr = row<T>(c, i0 + r) + j0;
                       for (std::int64_t j = 0; j < cols; ++j) {
                         // beta == 0 must not read c: its old contents may be garbage or NaN.
                         const double old = beta == 0.0 ? 0.0 : beta * static_cast<double>(cr[j]);
                         cr[j] = static_cast<T>(alpha * acc[r * kColTile + j] + old);
                       }
                     }
                   }
                 }
               });
}

}  // namespace

void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, double alpha, double beta) {
  const std::string op = "gemm";
  check_gemm_args(op, c, a, trans_a, b, trans_b);
  dispatch(common_dtype(op, {c, a, b}), op,
           [&](auto t) { gemm_impl<decltype(t)>(c, a, trans_a, b, trans_b, alpha, beta); });
}

}  // namespace tinyllama::cpu
