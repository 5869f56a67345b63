#pragma once
// Finite-difference machinery for the CPU op tests: host tensors in fp64,
// random fills that are never zero, central differences of a scalar loss,
// and the relative error used everywhere (max |a - b| / max |b|).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/mat.h"
#include "core/rng.h"

namespace tinyllama::testing {

struct HostTensor {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> v;

  HostTensor(std::int64_t r, std::int64_t c)
      : rows(r), cols(c), v(static_cast<std::size_t>(r * c)) {}
  Mat mat() { return Mat(v.data(), DType::F64, rows, cols); }
};

// Normal(0, scale) entries; a zero draw would hide a missing term, so none is kept.
inline HostTensor random_tensor(std::int64_t rows, std::int64_t cols, Rng& rng,
                                double scale = 1.0) {
  HostTensor t(rows, cols);
  for (double& x : t.v) {
    do {
      x = scale * rng.normal();
    } while (x == 0.0);
  }
  return t;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// d loss / d t by central differences; loss() must read t.
inline std::vector<double> numeric_gradient(HostTensor& t, const std::function<double()>& loss,
                                            double h = 1e-5) {
  std::vector<double> g(t.v.size());
  for (std::size_t i = 0; i < t.v.size(); ++i) {
    const double saved = t.v[i];
    t.v[i] = saved + h;
    const double up = loss();
    t.v[i] = saved - h;
    const double down = loss();
    t.v[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

inline double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

// Gradients are only meaningful when they are not all zero.
inline bool any_nonzero(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return x != 0.0; });
}

}  // namespace tinyllama::testing
