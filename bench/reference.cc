#include "bench/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "io/hf_weights.h"

namespace tinyllama::bench {
namespace {

// Bytes copied from the device at a time when gathering a run of rows.
constexpr std::int64_t kCopyBytes = std::int64_t{64} << 20;

}  // namespace

Index all_of(std::int64_t n) {
  return range_of(0, n);
}

Index range_of(std::int64_t begin, std::int64_t end) {
  Index out;
  for (std::int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

Index spread(std::int64_t n, std::int64_t count) {
  if (count >= n) return all_of(n);
  if (count <= 1) return n > 0 ? Index{0} : Index{};
  Index out;
  for (std::int64_t i = 0; i < count; ++i) out.push_back(i * (n - 1) / (count - 1));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Index merged(const Index& a, const Index& b) {
  Index out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

Index leading_rows(std::int64_t rows, std::int64_t cols, std::int64_t budget,
                   std::int64_t multiple) {
  const std::int64_t fit = cols > 0 ? budget / cols : rows;
  const std::int64_t whole = std::max<std::int64_t>(fit / multiple, 1) * multiple;
  return all_of(std::min(whole, rows));
}

HostMat::HostMat(std::int64_t rows, std::int64_t cols)
    : rows_(rows), cols_(cols), data_(static_cast<std::size_t>(rows * cols), 0.0) {}

HostMat gather(Backend& gpu, const Mat& m, const Index& rows, const Index& cols) {
  HostMat out(static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(cols.size()));
  if (rows.empty() || cols.empty()) return out;
  const auto es = static_cast<std::int64_t>(dtype_size(m.dtype));
  const std::int64_t row_bytes = m.ld * es;
  const std::int64_t rows_per_copy = std::max<std::int64_t>(1, kCopyBytes / row_bytes);
  std::vector<unsigned char> raw;
  std::size_t i = 0;
  while (i < rows.size()) {
    // A run of consecutive rows, at most rows_per_copy long, in one copy.
    std::size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1 &&
           static_cast<std::int64_t>(j - i) < rows_per_copy) {
      ++j;
    }
    const std::int64_t first = rows[i];
    const auto count = static_cast<std::int64_t>(j - i);
    // The last row of a view ends `cols` elements in: never read past it.
    const std::int64_t bytes = ((count - 1) * m.ld + m.cols) * es;
    raw.resize(static_cast<std::size_t>(bytes));
    gpu.download(raw.data(), static_cast<const char*>(m.data) + first * row_bytes,
                 static_cast<std::size_t>(bytes));
    for (std::int64_t r = 0; r < count; ++r) {
      const unsigned char* row = raw.data() + r * row_bytes;
      for (std::size_t c = 0; c < cols.size(); ++c) {
        out.at(static_cast<std::int64_t>(i) + r, static_cast<std::int64_t>(c)) =
            decode_element(row + cols[c] * es, m.dtype);
      }
    }
    i = j;
  }
  return out;
}

double max_rel_err(const HostMat& got, const HostMat& want) {
  if (got.rows() != want.rows() || got.cols() != want.cols()) {
    return std::numeric_limits<double>::infinity();
  }
  double diff = 0;
  double scale = 0;
  for (std::int64_t r = 0; r < got.rows(); ++r) {
    for (std::int64_t c = 0; c < got.cols(); ++c) {
      const double g = got.at(r, c);
      const double w = want.at(r, c);
      if (!std::isfinite(g) || !std::isfinite(w)) return std::numeric_limits<double>::infinity();
      diff = std::max(diff, std::abs(g - w));
      scale = std::max(scale, std::abs(w));
    }
  }
  return scale > 0 ? diff / scale : diff;
}

void Comparison::add(const std::string& output, const HostMat& got, const HostMat& want) {
  const double err = max_rel_err(got, want);
  // NaN never compares greater: infinity stands for every non-finite case.
  if (!any_ || err > worst_.max_rel_err) {
    worst_.max_rel_err = err;
    worst_.worst = output;
  }
  any_ = true;
}

CheckResult Comparison::result(std::string scope) const {
  CheckResult r = worst_;
  r.scope = std::move(scope);
  return r;
}

double tolerance(Precision precision) {
  return precision.compute == DType::F32 || precision.compute == DType::F64 ? 1e-4 : 2e-2;
}

std::string rows_scope(const Index& rows, std::int64_t total) {
  const auto n = static_cast<std::int64_t>(rows.size());
  if (n == total) return "all " + std::to_string(total) + " rows";
  if (n > 0 && rows.back() - rows.front() + 1 == n) {
    return "rows " + std::to_string(rows.front()) + "-" + std::to_string(rows.back()) + " of " +
           std::to_string(total);
  }
  return std::to_string(n) + " of " + std::to_string(total) + " rows";
}

}  // namespace tinyllama::bench
