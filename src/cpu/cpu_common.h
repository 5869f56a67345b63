#pragma once
// Helpers shared by the CPU reference ops: dtype dispatch, argument checks,
// element access through a Mat's row stride, and a deterministic parallel
// loop. Private to src/cpu.
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

}  // namespace tinyllama::cpu
