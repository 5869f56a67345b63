#pragma once
// A seeded generator whose streams are fixed by this file alone (the
// standard library's distributions differ between implementations), so runs
// on different machines, CPU or GPU, start from the same weights and data.
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>

namespace tinyllama {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), unbiased by rejection.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    std::uint64_t x = engine_();
    while (x >= limit) x = engine_();
    return x % n;
  }

  // Standard normal by Box-Muller; one draw per call, for simplicity.
  double normal() {
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  // The generator's whole state as text (the standard fixes its format), so
  // a checkpoint can continue a stream exactly where it was.
  std::string state() const {
    std::ostringstream out;
    out << engine_;
    return out.str();
  }
  // Back to a state(); returns false if `text` is not one.
  bool restore(const std::string& text) {
    std::istringstream in(text);
    std::mt19937_64 e;
    in >> e;
    if (in.fail()) return false;
    engine_ = e;
    return true;
  }

 private:
  std::mt19937_64 engine_;  // mt19937_64's output sequence is fixed by the standard
};

}  // namespace tinyllama
