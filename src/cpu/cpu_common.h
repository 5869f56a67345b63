#pragma once
// Helpers shared by the CPU reference ops: dtype dispatch, argument checks,
// element access through a Mat's row stride, and deterministic parallel
// loops. Private to src/cpu.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/mat.h"

namespace tinyllama::cpu {

[[noreturn]] inline void fail(const std::string& op, const std::string& what) {
  throw std::invalid_argument("cpu " + op + ": " + what);
}

inline void require(bool ok, const std::string& op, const std::string& what) {
  if (!ok) fail(op, what);
}

inline std::string shape_of(const Mat& m) {
  return "[" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "]";
}

inline void require_shape(const Mat& m, std::int64_t rows, std::int64_t cols, const std::string& op,
                          const char* name) {
  require(m.rows == rows && m.cols == cols, op,
          std::string(name) + " has shape " + shape_of(m) + ", expected [" + std::to_string(rows) +
              ", " + std::to_string(cols) + "]");
  require(m.data != nullptr || m.numel() == 0, op, std::string(name) + " has no data");
  require(m.ld >= m.cols, op, std::string(name) + " has a row stride smaller than its width");
}

// c = op(a) * op(b): the inner dimensions agree and c is [m, n].
inline void check_gemm_args(const std::string& op, const Mat& c, const Mat& a, bool trans_a,
                            const Mat& b, bool trans_b) {
  const std::int64_t m = trans_a ? a.cols : a.rows;
  const std::int64_t k = trans_a ? a.rows : a.cols;
  const std::int64_t kb = trans_b ? b.cols : b.rows;
  const std::int64_t n = trans_b ? b.rows : b.cols;
  require(k == kb, op,
          "inner dimensions differ: op(a) is [" + std::to_string(m) + ", " + std::to_string(k) +
              "], op(b) is [" + std::to_string(kb) + ", " + std::to_string(n) + "]");
  require_shape(c, m, n, op, "c");
  require_shape(a, a.rows, a.cols, op, "a");
  require_shape(b, b.rows, b.cols, op, "b");
}

// Every Mat of one CPU op shares a dtype: the compute dtype, which is also
// the stats dtype because the CPU runs only fp32 (stats fp32) or fp64 (stats
// fp64).
inline DType common_dtype(const std::string& op, std::initializer_list<Mat> mats) {
  const DType t = mats.begin()->dtype;
  for (const Mat& m : mats) {
    require(m.dtype == t, op,
            "mixed dtypes " + std::string(dtype_name(t)) + " and " +
                std::string(dtype_name(m.dtype)) +
                " (the cpu backend computes every operand of an op in one dtype)");
  }
  return t;
}

// Calls fn(T{}) with T = float or double; any other dtype is a usage error.
template <typename Fn>
void dispatch(DType t, const std::string& op, Fn&& fn) {
  switch (t) {
    case DType::F32:
      fn(float{});
      return;
    case DType::F64:
      fn(double{});
      return;
    default:
      fail(op, "unsupported dtype " + std::string(dtype_name(t)) + " (allowed: float32, float64)");
  }
}

template <typename T>
inline T* row(const Mat& m, std::int64_t r) {
  return m.ptr<T>() + r * m.ld;
}

inline unsigned worker_count() {
  return std::max(1u, std::thread::hardware_concurrency());
}

// Runs body(begin, end) over disjoint chunks of [0, n) on up to
// worker_count() threads. Determinism comes from the callers: every output
// element is produced by exactly one item with a fixed summation order, so
// the chunking never changes a result. Small jobs run inline, where
// spawning threads would cost more than the work.
template <typename Body>
void parallel_for(std::int64_t n, double flops_per_item, Body&& body) {
  constexpr double kMinFlopsPerThread = 2e5;
  const auto by_work =
      static_cast<std::int64_t>(static_cast<double>(n) * flops_per_item / kMinFlopsPerThread);
  const std::int64_t threads = std::clamp<std::int64_t>(
      std::min<std::int64_t>(by_work, static_cast<std::int64_t>(worker_count())), 1,
      std::max<std::int64_t>(n, 1));
  if (threads <= 1) {
    body(std::int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  const std::int64_t chunk = (n + threads - 1) / threads;
  for (std::int64_t t = 1; t < threads; ++t) {
    const std::int64_t begin = std::min(n, t * chunk);
    const std::int64_t end = std::min(n, begin + chunk);
    pool.emplace_back([&body, begin, end] { body(begin, end); });
  }
  body(std::int64_t{0}, std::min(n, chunk));
  for (std::thread& th : pool) th.join();
}

// An elementwise job over a [rows, cols] grid on up to worker_count()
// threads: body(r0, r1, c0, c1) gets disjoint blocks, whole rows where there
// are enough rows, else column ranges of one row at a time (a flat [1, N]
// view). Each element is computed alone, so results never depend on the
// split.
template <typename Body>
void parallel_elements(std::int64_t rows, std::int64_t cols, double flops_per_element,
                       Body&& body) {
  if (rows >= static_cast<std::int64_t>(worker_count()) || cols <= 1) {
    parallel_for(rows, flops_per_element * static_cast<double>(cols),
                 [&](std::int64_t r0, std::int64_t r1) { body(r0, r1, std::int64_t{0}, cols); });
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    parallel_for(cols, flops_per_element,
                 [&](std::int64_t c0, std::int64_t c1) { body(r, r + 1, c0, c1); });
  }
}

}  // namespace tinyllama::cpu
