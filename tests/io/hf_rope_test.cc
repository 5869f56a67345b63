// The q/k row permutation between tinyllama's interleaved RoPE and Hugging
// Face's rotate-half (io/hf_rope.h): its own round trip, and against the
// rotate-half formula itself: rotating x with our interleaved RoPE and
// then permuting gives the same as permuting x and rotating it the way
// transformers' LLaMA does (q·cos + rotate_half(q)·sin, written out here).
#include "io/hf_rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "ops/rope/cpu_rope.h"

namespace tinyllama {
namespace {

std::vector<double> random_values(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

TEST(HfRope, PermutationRoundTripsAndMovesRows) {
  const std::int64_t head_dim = 8, heads = 3, cols = 5;
  const std::int64_t rows = heads * head_dim;
  const std::vector<double> original = random_values(static_cast<std::size_t>(rows * cols), 1);
  std::vector<double> w = original;
  reorder_rope_rows(w.data(), rows, cols, head_dim, RopeLayout::Interleaved,
                    RopeLayout::RotateHalf);
  EXPECT_NE(w, original);
  // Head 1, HF row 5 (second half, i = 1) is interleaved row 2*1+1 = 3.
  for (std::int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(w[(8 + 5) * cols + c], original[(8 + 3) * cols + c]);
    EXPECT_EQ(w[(8 + 1) * cols + c], original[(8 + 2) * cols + c]);
  }
  reorder_rope_rows(w.data(), rows, cols, head_dim, RopeLayout::RotateHalf,
                    RopeLayout::Interleaved);
  EXPECT_EQ(w, original);
  // A bijection: every interleaved row is taken exactly once per head.
  std::vector<int> taken(static_cast<std::size_t>(head_dim), 0);
  for (std::int64_t j = 0; j < head_dim; ++j) ++taken[interleaved_row_of_rotate_half_row(j, 8)];
  for (int t : taken) EXPECT_EQ(t, 1);
  EXPECT_THROW(
      reorder_rope_rows(w.data(), 12, cols, 8, RopeLayout::Interleaved, RopeLayout::RotateHalf),
      std::invalid_argument);
}

// transformers' apply_rotary_pos_emb for one head vector at position p:
// out = x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1),
// with cos/sin of p * inv_freq repeated over both halves.
std::vector<double> hf_rotate_half_rope(const std::vector<double>& x, std::int64_t p,
                                        double theta) {
  const auto hd = static_cast<std::int64_t>(x.size());
  const std::int64_t half = hd / 2;
  std::vector<double> out(x.size());
  for (std::int64_t d = 0; d < hd; ++d) {
    const std::int64_t i = d % half;
    const double inv_freq = 1.0 / std::pow(theta, static_cast<double>(2 * i) / hd);
    const double angle = static_cast<double>(p) * inv_freq;
    const double rotated = d < half ? -x[d + half] : x[d - half];
    out[d] = x[d] * std::cos(angle) + rotated * std::sin(angle);
  }
  return out;
}

TEST(HfRope, PermutedInterleavedRopeIsRotateHalfRope) {
  for (const std::int64_t head_dim : {2, 8, 64}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    const int seq = 7, heads = 2;
    const double theta = 10000.0;
    const std::int64_t width = heads * head_dim;
    // Row s of x: the q vector of position s (seq rows, every head).
    const std::vector<double> x = random_values(static_cast<std::size_t>(seq * width), 2);
    std::vector<double> ours = x;
    cpu::rope(Mat(ours.data(), DType::F64, seq, width), seq, static_cast<int>(head_dim), theta, +1);
    for (std::int64_t s = 0; s < seq; ++s) {
      for (std::int64_t h = 0; h < heads; ++h) {
        // One head's vector as a column of rows, so the row permutation applies to it.
        std::vector<double> xh(x.begin() + s * width + h * head_dim,
                               x.begin() + s * width + (h + 1) * head_dim);
        std::vector<double> yh(ours.begin() + s * width + h * head_dim,
                               ours.begin() + s * width + (h + 1) * head_dim);
        reorder_rope_rows(xh.data(), head_dim, 1, head_dim, RopeLayout::Interleaved,
                          RopeLayout::RotateHalf);
        reorder_rope_rows(yh.data(), head_dim, 1, head_dim, RopeLayout::Interleaved,
                          RopeLayout::RotateHalf);
        const std::vector<double> hf = hf_rotate_half_rope(xh, s, theta);
        for (std::int64_t d = 0; d < head_dim; ++d) {
          EXPECT_NEAR(hf[d], yh[d], 1e-12) << "position " << s << " head " << h << " dim " << d;
        }
      }
    }
    // Not vacuous: at position > 0 the rotation moved the values.
    EXPECT_GT(std::abs(ours[width + 1] - x[width + 1]), 1e-6);
  }
}

}  // namespace
}  // namespace tinyllama
