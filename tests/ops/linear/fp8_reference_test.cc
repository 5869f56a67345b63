// FP8 per-tensor scaling and the reference FP8 GEMM (ops/linear/cpu_fp8.h):
// the scale maps a tensor's amax onto the largest finite code, quantising
// errs by at most half an FP8 ulp at the scaled value, and the GEMM equals a
// double GEMM of the dequantised operands, strided, in every format pair
// the FP8 linear layers use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/narrow_float.h"
#include "core/rng.h"
#include "ops/linear/cpu_fp8.h"

namespace tinyllama::testing {
namespace {

using cpu::Fp8Format;

constexpr Fp8Format kBoth[] = {Fp8Format::E4M3, Fp8Format::E5M2};

// Normal draws with a few outliers of either sign, never exactly zero.
std::vector<float> random_tensor(std::size_t n, double scale, Rng& rng) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    do {
      x[i] = static_cast<float>(scale * rng.normal());
    } while (x[i] == 0.0f);
    if (i % 97 == 5) x[i] *= 30.0f;
  }
  return x;
}

std::uint8_t max_code(Fp8Format f) {
  return f == Fp8Format::E4M3 ? 0x7E : 0x7B;
}

// Half the spacing of the format's codes at |v|: its unit in the last place
// is 2^(e - mantissa bits) with e the binade of v, never below the smallest
// normal's (the subnormals share that unit).
double half_ulp(double v, Fp8Format f) {
  const int man_bits = f == Fp8Format::E4M3 ? 3 : 2;
  const int min_exp = f == Fp8Format::E4M3 ? -6 : -14;
  const int e = v == 0 ? min_exp : std::max(std::ilogb(v), min_exp);
  return std::ldexp(0.5, e - man_bits);
}

TEST(Fp8Scaling, AmaxIsTheLargestMagnitude) {
  const std::vector<float> x = {0.5f, -3.25f, 2.0f, 1e-7f, -0.0f, 3.0f};
  EXPECT_EQ(cpu::amax(x.data(), x.size()), 3.25);
  EXPECT_EQ(cpu::amax(x.data(), 0), 0.0);
  const std::vector<float> with_inf = {1.0f, -std::numeric_limits<float>::infinity(), 2.0f};
  EXPECT_EQ(cpu::amax(with_inf.data(), with_inf.size()), std::numeric_limits<double>::infinity());
  const std::vector<float> with_nan = {1.0f, std::numeric_limits<float>::quiet_NaN(), 9.0f};
  EXPECT_TRUE(std::isnan(cpu::amax(with_nan.data(), with_nan.size())));
}

TEST(Fp8Scaling, ScaleForMapsAmaxExactlyToTheLargestFiniteCode) {
  Rng rng(7);
  EXPECT_EQ(cpu::fp8_max_finite(Fp8Format::E4M3), 448.0);
  EXPECT_EQ(cpu::fp8_max_finite(Fp8Format::E5M2), 57344.0);
  for (Fp8Format f : kBoth) {
    const double max = cpu::fp8_max_finite(f);
    for (double amax : {1.0, 3.25, 0.0173, 1e-6, 2.5e4, 448.0, 1e9, 7.0 / 3.0}) {
      for (int i = 0; i < 2; ++i) {
        const double a = i == 0 ? amax : amax * (1.0 + std::fabs(rng.normal()));
        const auto af = static_cast<float>(a);
        const float scale = cpu::fp8_scale_for(af, f);
        EXPECT_NEAR(scale, max / af, max / af * 1e-7) << a;
        std::uint8_t q[2];
        const float both[2] = {af, -af};
        cpu::quantize_fp8(both, 2, scale, f, q);
        EXPECT_EQ(q[0], max_code(f)) << a;
        EXPECT_EQ(q[1], max_code(f) | 0x80) << a;
        EXPECT_EQ(cpu::fp8_value(q[0], f), max);
        // A margin of 2 leaves two binades: amax lands on max / 4 (a code).
        cpu::quantize_fp8(both, 1, cpu::fp8_scale_for(af, f, 2), f, q);
        EXPECT_EQ(cpu::fp8_value(q[0], f), max / 4) << a;
      }
    }
    // Nothing to scale by: 1.
    EXPECT_EQ(cpu::fp8_scale_for(0.0, f), 1.0f);
    EXPECT_EQ(cpu::fp8_scale_for(std::numeric_limits<double>::infinity(), f), 1.0f);
    EXPECT_EQ(cpu::fp8_scale_for(std::numeric_limits<double>::quiet_NaN(), f), 1.0f);
    // A quotient past fp32's range is clamped, not inf.
    EXPECT_EQ(cpu::fp8_scale_for(1e-40, f), std::numeric_limits<float>::max());
  }
  EXPECT_EQ(cpu::fp8_inverse_scale(4.0f), 0.25f);
}

TEST(Fp8Quantize, ErrsByAtMostHalfAnUlpAtTheScaledValue) {
  Rng rng(11);
  for (Fp8Format f : kBoth) {
    const std::vector<float> x = random_tensor(4096, 0.02, rng);
    const float scale = cpu::fp8_scale_for(cpu::amax(x.data(), x.size()), f);
    std::vector<std::uint8_t> q(x.size());
    cpu::quantize_fp8(x.data(), x.size(), scale, f, q.data());
    std::vector<float> back(x.size());
    cpu::dequantize_fp8(q.data(), q.size(), scale, f, back.data());
    const double inv = cpu::fp8_inverse_scale(scale);
    int nonzero = 0;
    int subnormal = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = static_cast<double>(x[i]) * scale;  // the scaled value
      const double got = cpu::fp8_value(q[i], f);
      ASSERT_TRUE(std::isfinite(got)) << i;
      // The fp32 product rounds first: a relative 2^-24 beside the half ulp.
      const double bound = half_ulp(v, f) + std::fabs(v) * 0x1p-24;
      ASSERT_LE(std::fabs(got - v), bound) << i << ": " << x[i] << " -> " << got;
      EXPECT_EQ(std::signbit(got), std::signbit(v));
      // Dequantised: the same error, scaled back, plus the fp32 rounding.
      ASSERT_LE(std::fabs(back[i] - x[i]), bound * inv * (1 + 1e-6) + std::fabs(x[i]) * 0x1p-23)
          << i;
      EXPECT_EQ(back[i], static_cast<float>(got * inv));
      nonzero += got != 0;
      subnormal += (q[i] & 0x7F) != 0 && (q[i] & 0x7F) < (f == Fp8Format::E4M3 ? 0x08 : 0x04);
    }
    EXPECT_GT(nonzero, 4000);  // the outliers stretch the scale, not so far that all is 0
    if (f == Fp8Format::E4M3) {
      EXPECT_GT(subnormal, 0);  // the small values reach the subnormals
    }
  }
}

struct Operand {
  std::int64_t rows, k, ld;
  Fp8Format format;
  float scale;
  std::vector<std::uint8_t> codes;
  cpu::Fp8Matrix matrix() const { return {codes.data(), ld, format, scale}; }
  // The dequantised element (r, c) in double: value * fp32 inverse scale.
  double at(std::int64_t r, std::int64_t c) const {
    return cpu::fp8_value(codes[static_cast<std::size_t>(r * ld + c)], format) *
           static_cast<double>(cpu::fp8_inverse_scale(scale));
  }
};

// A [rows, k] operand quantised from random data with its own scale; the
// padding past k holds codes that would spoil the result if read.
Operand quantized(std::int64_t rows, std::int64_t k, std::int64_t ld, Fp8Format f, double spread,
                  Rng& rng) {
  Operand o{rows, k, ld, f, 1.0f, std::vector<std::uint8_t>(static_cast<std::size_t>(rows * ld))};
  const std::vector<float> x = random_tensor(static_cast<std::size_t>(rows * k), spread, rng);
  o.scale = cpu::fp8_scale_for(cpu::amax(x.data(), x.size()), f);
  for (std::int64_t r = 0; r < rows; ++r) {
    cpu::quantize_fp8(x.data() + r * k, static_cast<std::size_t>(k), o.scale, f,
                      o.codes.data() + r * ld);
    for (std::int64_t c = k; c < ld; ++c) o.codes[static_cast<std::size_t>(r * ld + c)] = 0x7E;
  }
  return o;
}

// The double GEMM of the dequantised operands: C(i, j) = sum_k A(i, k) B(j, k).
std::vector<double> dequantized_gemm(const Operand& a, const Operand& b) {
  std::vector<double> c(static_cast<std::size_t>(a.rows * b.rows));
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (std::int64_t j = 0; j < b.rows; ++j) {
      double s = 0;
      for (std::int64_t kk = 0; kk < a.k; ++kk) s += a.at(i, kk) * b.at(j, kk);
      c[static_cast<std::size_t>(i * b.rows + j)] = s;
    }
  }
  return c;
}

// Forward (E4M3 x E4M3), dgrad and wgrad (an E5M2 gradient with an E4M3
// operand, either side), and E5M2 x E5M2.
TEST(Fp8Gemm, EqualsADoubleGemmOfTheDequantizedOperands) {
  Rng rng(45);
  const std::int64_t m = 13, n = 17, k = 40, ldc = n + 3;
  const Fp8Format pairs[][2] = {{Fp8Format::E4M3, Fp8Format::E4M3},
                                {Fp8Format::E5M2, Fp8Format::E4M3},
                                {Fp8Format::E4M3, Fp8Format::E5M2},
                                {Fp8Format::E5M2, Fp8Format::E5M2}};
  for (const auto& pair : pairs) {
    const Operand a = quantized(m, k, k + 5, pair[0], 1.0, rng);
    const Operand b = quantized(n, k, k + 2, pair[1], 0.02, rng);
    const std::vector<double> want = dequantized_gemm(a, b);
    for (bool bf16 : {false, true}) {
      const float sentinel = -12345.0f;
      std::vector<float> c(static_cast<std::size_t>(m * ldc), sentinel);
      cpu::gemm_fp8_reference(m, n, k, a.matrix(), b.matrix(), c.data(), ldc, bf16);
      int nonzero = 0;
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < ldc; ++j) {
          const float got = c[static_cast<std::size_t>(i * ldc + j)];
          if (j >= n) {
            ASSERT_EQ(got, sentinel) << "wrote past N at " << i << ", " << j;
            continue;
          }
          const double w = want[static_cast<std::size_t>(i * n + j)];
          nonzero += got != 0;
          if (!bf16) {
            // Both are the exact sum rounded to fp32 but for double's
            // rounding in the test's own sum.
            ASSERT_NEAR(got, w, std::fabs(w) * 0x1p-23 + 1e-30) << i << ", " << j;
          } else {
            ASSERT_EQ(bf16_bits_to_double(round_to_bf16_bits(got)), got) << "not a bf16 value";
            ASSERT_NEAR(got, w, std::fabs(w) * 0x1p-8) << i << ", " << j;
          }
        }
      }
      EXPECT_GT(nonzero, m * n * 9 / 10);
    }
  }
}

// Quantised both sides with their own scales, the FP8 product stays within a
// few percent of the fp32 product it stands for (the scales cancel).
TEST(Fp8Gemm, ApproximatesTheUnquantizedProduct) {
  Rng rng(3);
  const std::int64_t m = 32, n = 48, k = 64;
  const std::vector<float> x = random_tensor(static_cast<std::size_t>(m * k), 1.0, rng);
  const std::vector<float> w = random_tensor(static_cast<std::size_t>(n * k), 0.02, rng);
  std::vector<std::uint8_t> xq(x.size()), wq(w.size());
  const float sx = cpu::fp8_scale_for(cpu::amax(x.data(), x.size()), Fp8Format::E4M3);
  const float sw = cpu::fp8_scale_for(cpu::amax(w.data(), w.size()), Fp8Format::E4M3);
  cpu::quantize_fp8(x.data(), x.size(), sx, Fp8Format::E4M3, xq.data());
  cpu::quantize_fp8(w.data(), w.size(), sw, Fp8Format::E4M3, wq.data());
  std::vector<float> c(static_cast<std::size_t>(m * n));
  cpu::gemm_fp8_reference(m, n, k, {xq.data(), k, Fp8Format::E4M3, sx},
                          {wq.data(), k, Fp8Format::E4M3, sw}, c.data(), n, false);
  double diff = 0, norm = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (std::int64_t kk = 0; kk < k; ++kk) {
        exact += static_cast<double>(x[static_cast<std::size_t>(i * k + kk)]) *
                 w[static_cast<std::size_t>(j * k + kk)];
      }
      const double d = c[static_cast<std::size_t>(i * n + j)] - exact;
      diff += d * d;
      norm += exact * exact;
    }
  }
  const double rel = std::sqrt(diff / norm);
  EXPECT_GT(rel, 1e-4);  // it is quantised
  EXPECT_LT(rel, 0.08);  // E4M3's half ulp is 2^-4 relative at worst; errors average out
}

TEST(Fp8Gemm, RejectsBadShapes) {
  const std::uint8_t codes[16] = {};
  float c[16];
  const cpu::Fp8Matrix a{codes, 4, Fp8Format::E4M3, 1.0f};
  EXPECT_THROW(cpu::gemm_fp8_reference(2, 2, 5, a, a, c, 2, false), std::invalid_argument);
  EXPECT_THROW(cpu::gemm_fp8_reference(2, 3, 4, a, a, c, 2, false), std::invalid_argument);
  EXPECT_THROW(cpu::gemm_fp8_reference(-1, 2, 4, a, a, c, 2, false), std::invalid_argument);
  EXPECT_NO_THROW(cpu::gemm_fp8_reference(2, 2, 4, a, a, c, 2, false));
  EXPECT_EQ(c[0], 0.0f);
}

}  // namespace
}  // namespace tinyllama::testing
