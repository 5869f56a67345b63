#pragma once
// The CPU side of a kernel check: copies of (parts of) device tensors in
// float64 for the CPU reference backend, and the comparison of its results
// with the GPU's.
//
// The CPU reference is slow (plain loops in float64), so at large shapes a
// check compares a slice: the rows, columns or heads a case picks with the
// Index helpers below, chosen so that every output element compared is
// computed completely (a GEMM's sampled rows and columns each get their
// whole reduction; attention keeps whole sequences of whole kv groups).
#include <cstdint>
#include <string>
#include <vector>

#include "bench/op_case.h"
#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::bench {

// Rows or columns to copy or compare: ascending and distinct.
using Index = std::vector<std::int64_t>;

Index all_of(std::int64_t n);                          // 0 .. n-1
Index range_of(std::int64_t begin, std::int64_t end);  // begin .. end-1
// `count` indices spread evenly over [0, n), 0 and n-1 included; all of
// them when count >= n.
Index spread(std::int64_t n, std::int64_t count);
// Sorted union.
Index merged(const Index& a, const Index& b);
// Leading rows of a [rows, cols] tensor whose elements stay within `budget`:
// a multiple of `multiple` rows (whole sequences, for ops whose rows are
// positions), at least one multiple, at most all rows.
Index leading_rows(std::int64_t rows, std::int64_t cols, std::int64_t budget,
                   std::int64_t multiple = 1);

// A float64 matrix in host memory, the CPU reference's operand.
class HostMat {
 public:
  HostMat(std::int64_t rows, std::int64_t cols);  // zeros
  HostMat(HostMat&&) = default;
  HostMat& operator=(HostMat&&) = default;
  HostMat(const HostMat&) = delete;
  HostMat& operator=(const HostMat&) = delete;

  Mat mat() { return Mat(data_.data(), DType::F64, rows_, cols_); }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  double at(std::int64_t r, std::int64_t c) const {
    return data_[static_cast<std::size_t>(r * cols_ + c)];
  }
  double& at(std::int64_t r, std::int64_t c) {
    return data_[static_cast<std::size_t>(r * cols_ + c)];
  }

 private:
  std::int64_t rows_, cols_;
  std::vector<double> data_;
};

// Elements [rows x cols] of a device matrix (any view, strided or not),
// decoded to float64. Runs of consecutive rows are copied in bulk.
HostMat gather(Backend& gpu, const Mat& m, const Index& rows, const Index& cols);
inline HostMat download(Backend& gpu, const Mat& m) {
  return gather(gpu, m, all_of(m.rows), all_of(m.cols));
}

// max |got - want| / max |want| (the plain difference when want is all
// zeros); infinity when any element of either is not finite.
double max_rel_err(const HostMat& got, const HostMat& want);

// The outputs one check compares, reduced to the worst.
class Comparison {
 public:
  void add(const std::string& output, const HostMat& got, const HostMat& want);
  CheckResult result(std::string scope) const;

 private:
  CheckResult worst_;
  bool any_ = false;
};

// The largest max_rel_err a check may show and pass, per compute dtype:
// fp32 1e-4 (the GPU unit tests allow 1e-5 at small shapes; here fp32
// sums run over up to 32768 terms); bf16 and fp16 2e-2, the GPU unit
// tests' tolerance (outputs are rounded to 8 or 11 significant bits, and
// low-precision intermediates such as attention's P add a few roundings).
double tolerance(Precision precision);

// "all 1024 rows" or "rows 0-523 of 8192".
std::string rows_scope(const Index& rows, std::int64_t total);

}  // namespace tinyllama::bench
