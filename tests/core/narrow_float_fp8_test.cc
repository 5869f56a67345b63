// The FP8 codecs (core/narrow_float.h) against the formats' definitions:
// every code's value computed here from its sign, exponent and mantissa
// fields, and rounding checked against a brute-force nearest-code search.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/narrow_float.h"

namespace tinyllama {
namespace {

struct Format {
  std::string name;
  int exp_bits;
  int man_bits;
  bool has_inf;  // E5M2 has infinities; E4M3FN has none
  double max_finite;
  std::uint8_t (*encode)(double);
  double (*decode)(std::uint8_t);
};

const Format kE4m3{"E4M3", 4, 3, false, 448.0, round_to_e4m3_bits, e4m3_bits_to_double};
const Format kE5m2{"E5M2", 5, 2, true, 57344.0, round_to_e5m2_bits, e5m2_bits_to_double};
const Format* const kFormats[] = {&kE4m3, &kE5m2};

bool same(double a, double b) {
  return a == b && std::signbit(a) == std::signbit(b);
}

// The value the format's definition gives a code, written out independently
// of the codec: (-1)^s * 2^(e - bias) * (1 + m / 2^M) for normals,
// (-1)^s * 2^(1 - bias) * (m / 2^M) for subnormals (e == 0). E5M2's top
// exponent is inf (m == 0) or NaN; E4M3FN's top exponent is normal except
// m all ones, its only NaN.
double defined_value(const Format& f, unsigned code) {
  const double sign = (code >> 7) ? -1.0 : 1.0;
  const unsigned e = (code >> f.man_bits) & ((1U << f.exp_bits) - 1);
  const unsigned m = code & ((1U << f.man_bits) - 1);
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const double frac = static_cast<double>(m) / static_cast<double>(1U << f.man_bits);
  const unsigned top = (1U << f.exp_bits) - 1;
  if (f.has_inf && e == top) {
    return m == 0 ? sign * std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  }
  if (!f.has_inf && e == top && m == (1U << f.man_bits) - 1) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (e == 0) return sign * std::pow(2.0, 1 - bias) * frac;
  return sign * std::pow(2.0, static_cast<int>(e) - bias) * (1.0 + frac);
}

// The finite non-negative codes in increasing order of value: 0x00 up to
// the largest finite code (the positive codes are ordered as integers).
std::vector<unsigned> positive_finite_codes(const Format& f) {
  std::vector<unsigned> codes;
  for (unsigned c = 0; c < 0x80; ++c) {
    if (std::isfinite(defined_value(f, c))) codes.push_back(c);
  }
  return codes;
}

// The oracle: the code nearest to x by brute force over every finite code,
// a tie going to the even code (the one whose mantissa's last bit is 0);
// past the largest finite value, that value (satfinite).
unsigned nearest_code(const Format& f, double x) {
  const unsigned sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x);
  if (a >= f.max_finite) return sign | static_cast<unsigned>(f.encode(f.max_finite));
  unsigned best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (unsigned c : positive_finite_codes(f)) {
    const double d = std::fabs(a - defined_value(f, c));
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return sign | best;
}

TEST(Fp8Codec, EveryCodeDecodesToItsDefinedValue) {
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    int nans = 0;
    int infs = 0;
    for (unsigned c = 0; c < 256; ++c) {
      const double want = defined_value(*f, c);
      const double got = f->decode(static_cast<std::uint8_t>(c));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << std::hex << c;
        ++nans;
      } else {
        EXPECT_TRUE(same(got, want)) << std::hex << c << ": " << got << " vs " << want;
        infs += std::isinf(got);
      }
    }
    // E4M3FN: 0x7F and 0xFF only; E5M2: 0x7D..0x7F and 0xFD..0xFF, inf at 0x7C, 0xFC.
    EXPECT_EQ(nans, f->has_inf ? 6 : 2);
    EXPECT_EQ(infs, f->has_inf ? 2 : 0);
  }
}

TEST(Fp8Codec, KnownValues) {
  EXPECT_EQ(e4m3_bits_to_double(0x7E), 448.0);                // largest finite
  EXPECT_EQ(e4m3_bits_to_double(0x78), 256.0);                // top exponent is normal
  EXPECT_EQ(e4m3_bits_to_double(0x38), 1.0);                  // bias 7
  EXPECT_EQ(e4m3_bits_to_double(0x08), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(e4m3_bits_to_double(0x07), std::ldexp(7.0, -9));  // largest subnormal
  EXPECT_EQ(e4m3_bits_to_double(0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_bits_to_double(0xC4), -3.0);
  EXPECT_TRUE(std::isnan(e4m3_bits_to_double(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_bits_to_double(0xFF)));
  EXPECT_EQ(e5m2_bits_to_double(0x7B), 57344.0);
  EXPECT_EQ(e5m2_bits_to_double(0x3C), 1.0);  // bias 15
  EXPECT_EQ(e5m2_bits_to_double(0x04), std::ldexp(1.0, -14));
  EXPECT_EQ(e5m2_bits_to_double(0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(e5m2_bits_to_double(0xC2), -3.0);
  EXPECT_EQ(e5m2_bits_to_double(0x7C), std::numeric_limits<double>::infinity());
  EXPECT_EQ(e5m2_bits_to_double(0xFC), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to_e4m3_bits(1.0), 0x38);
  EXPECT_EQ(round_to_e4m3_bits(-3.0), 0xC4);
  EXPECT_EQ(round_to_e4m3_bits(0.1), 0x1D);  // 0.1015625 = 2^-4 * 1.625 is nearest
  EXPECT_EQ(round_to_e5m2_bits(-3.0), 0xC2);
  EXPECT_EQ(round_to_e5m2_bits(0.1), 0x2E);  // 0.09375 = 2^-4 * 1.5 is nearest
}

TEST(Fp8Codec, EveryFiniteCodeRoundTrips) {
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    int finite = 0;
    for (unsigned c = 0; c < 256; ++c) {
      const double v = f->decode(static_cast<std::uint8_t>(c));
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(f->encode(v), c) << std::hex << c << " = " << v;  // -0 included: 0x80
      ++finite;
    }
    EXPECT_EQ(finite, f->has_inf ? 248 : 254);
  }
}

// Midpoints between neighbouring codes (subnormal, across the subnormal /
// normal boundary, normal, across exponents) round to the code with the even
// mantissa; a double either side of the midpoint rounds to its nearer code.
TEST(Fp8Codec, TiesRoundToEven) {
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    const std::vector<unsigned> codes = positive_finite_codes(*f);
    for (size_t i = 0; i + 1 < codes.size(); ++i) {
      const unsigned lo = codes[i];
      const unsigned hi = codes[i + 1];
      const double mid = (f->decode(lo) + f->decode(hi)) / 2;  // exact in double
      const unsigned even = (lo & 1) == 0 ? lo : hi;
      for (double s : {1.0, -1.0}) {
        const unsigned sign = s < 0 ? 0x80 : 0;
        EXPECT_EQ(f->encode(s * mid), sign | even) << std::hex << lo << ".." << hi;
        EXPECT_EQ(f->encode(s * std::nextafter(mid, 0.0)), sign | lo) << std::hex << lo;
        EXPECT_EQ(f->encode(s * std::nextafter(mid, 1e9)), sign | hi) << std::hex << hi;
      }
    }
  }
  // Spot checks written out: 1.0625 lies halfway between E4M3's 1.0 (0x38)
  // and 1.125 (0x39), 1.1875 halfway between 1.125 and 1.25 (0x3A).
  EXPECT_EQ(round_to_e4m3_bits(1.0625), 0x38);
  EXPECT_EQ(round_to_e4m3_bits(1.1875), 0x3A);
  EXPECT_EQ(round_to_e4m3_bits(std::ldexp(1.5, -9)), 0x02);  // subnormals 1 and 2 (x 2^-9)
  EXPECT_EQ(round_to_e4m3_bits(std::ldexp(2.5, -9)), 0x02);  // 2 and 3
  EXPECT_EQ(round_to_e5m2_bits(1.125), 0x3C);                // 1.0 and 1.25
  EXPECT_EQ(round_to_e5m2_bits(1.375), 0x3E);                // 1.25 and 1.5
}

TEST(Fp8Codec, SaturatesToLargestFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  // E4M3FN: 464 is the midpoint to where 480 would be (its NaN code); every
  // finite value past 448 and inf give 448.
  for (double x : {448.0, 449.0, 464.0, 465.0, 480.0, 1000.0, 1e10, 1e300, inf}) {
    EXPECT_EQ(round_to_e4m3_bits(x), 0x7E) << x;
    EXPECT_EQ(round_to_e4m3_bits(-x), 0xFE) << x;
  }
  EXPECT_EQ(round_to_e4m3_bits(447.0), 0x7E);
  EXPECT_EQ(round_to_e4m3_bits(420.0), 0x7D);  // 416 and 448: below the midpoint 432
  // E5M2: 61440 is the midpoint to inf; satfinite saturates instead.
  for (double x : {57344.0, 57345.0, 61440.0, 65536.0, 1e10, 1e300, inf}) {
    EXPECT_EQ(round_to_e5m2_bits(x), 0x7B) << x;
    EXPECT_EQ(round_to_e5m2_bits(-x), 0xFB) << x;
  }
  EXPECT_EQ(round_to_e5m2_bits(54000.0), 0x7B);  // 49152 and 57344: above the midpoint 53248
  EXPECT_EQ(round_to_e5m2_bits(52000.0), 0x7A);
}

TEST(Fp8Codec, NanGivesANanCode) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(round_to_e4m3_bits(nan), 0x7F);
  EXPECT_EQ(round_to_e4m3_bits(-nan), 0xFF);
  EXPECT_TRUE(std::isnan(e5m2_bits_to_double(round_to_e5m2_bits(nan))));
  EXPECT_TRUE(std::isnan(e5m2_bits_to_double(round_to_e5m2_bits(-nan))));
}

// Below half the smallest subnormal gives a signed zero; from there up to the
// smallest normal, the subnormal codes.
TEST(Fp8Codec, TinyValuesGoToZeroOrSubnormal) {
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    const double sub = f->decode(0x01);  // the smallest subnormal
    for (double x : {1e-300, std::numeric_limits<double>::denorm_min(), sub / 4, sub / 2}) {
      EXPECT_EQ(f->encode(x), 0x00) << x;
      EXPECT_EQ(f->encode(-x), 0x80) << x;
    }
    EXPECT_EQ(f->encode(std::nextafter(sub / 2, 1.0)), 0x01);
    EXPECT_EQ(f->encode(-0.75 * sub), 0x81);
    EXPECT_EQ(f->encode(sub), 0x01);
    EXPECT_EQ(f->encode(1.4 * sub), 0x01);
    EXPECT_EQ(f->encode(1.6 * sub), 0x02);
    const unsigned smallest_normal = 1U << f->man_bits;
    const double normal = f->decode(static_cast<std::uint8_t>(smallest_normal));
    EXPECT_EQ(f->encode(normal - sub), smallest_normal - 1);  // the largest subnormal
    EXPECT_EQ(f->encode(normal - 0.4 * sub), smallest_normal);
    EXPECT_EQ(f->encode(0.0), 0x00);
    EXPECT_EQ(f->encode(-0.0), 0x80);
  }
}

// Random doubles over the whole range (zero-ward of the subnormals to past
// the saturation point, both signs) against the brute-force nearest code.
TEST(Fp8Codec, RandomDoublesRoundToTheNearestCode) {
  std::mt19937_64 rng(45);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    const int lo = f->has_inf ? -20 : -12;  // a few binades below the smallest subnormal
    const int hi = f->has_inf ? 18 : 11;    // a few past the largest finite value
    std::uniform_int_distribution<int> exponent(lo, hi);
    int nonzero = 0;
    for (int i = 0; i < 20000; ++i) {
      const double x = (i % 2 ? -1.0 : 1.0) * std::ldexp(mantissa(rng), exponent(rng));
      const unsigned got = f->encode(x);
      ASSERT_EQ(got, nearest_code(*f, x)) << x;
      nonzero += (got & 0x7F) != 0;
    }
    EXPECT_GT(nonzero, 15000);  // the draws exercise the codes, not just zero
  }
}

}  // namespace
}  // namespace tinyllama
