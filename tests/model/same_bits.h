#pragma once
// Bitwise equality of two runs' values, for the tests that hold an
// implementation to the bits of another (EXPECT_EQ on doubles would also
// accept -0 == +0, and fail on equal NaNs).
#include <cstring>
#include <vector>

namespace tinyllama {

inline bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace tinyllama
