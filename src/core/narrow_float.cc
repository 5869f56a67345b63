#include "core/narrow_float.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace tinyllama {
namespace {

// The magnitude of x (finite, not NaN) rounded to a binary format with
// `exp_bits` exponent and `man_bits` mantissa bits, ties to even, by integer
// arithmetic on the double's bits: the format's code without its sign bit.
// A value past the format's range gives a code past its largest finite one
// (possibly past its exponent field), which the caller saturates as the
// format wants.
std::uint64_t round_magnitude(std::uint64_t b, int exp_bits, int man_bits) {
  const int e = static_cast<int>((b >> 52) & 0x7ff);
  const std::uint64_t m = b & ((1ULL << 52) - 1);
  if (e == 0) return 0;  // double subnormals are far below any narrow subnormal
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int narrow_e = e - 1023 + bias;  // biased exponent in the narrow format
  // Bits of the 53-bit significand to drop; more for narrow subnormals,
  // whose unit is fixed at the smallest normal exponent.
  const int shift = 52 - man_bits + (narrow_e >= 1 ? 0 : 1 - narrow_e);
  if (shift >= 64) return 0;  // below half the smallest subnormal
  const std::uint64_t full = (1ULL << 52) | m;
  std::uint64_t kept = full >> shift;
  const std::uint64_t rest = full & ((1ULL << shift) - 1);
  const std::uint64_t half = 1ULL << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  // For normals `kept` carries the implicit bit, which adds one to the
  // exponent field; a rounding carry moves into the exponent by itself.
  return narrow_e >= 1 ? (static_cast<std::uint64_t>(narrow_e - 1) << man_bits) + kept : kept;
}

// Rounds to an IEEE binary format (bf16, fp16), ties to even; past the
// largest finite value it overflows to infinity, as IEEE rounding does.
std::uint16_t round_to_narrow(double x, int exp_bits, int man_bits) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  const auto sign = static_cast<std::uint16_t>((b >> 63) << (exp_bits + man_bits));
  const std::uint32_t inf = ((1U << exp_bits) - 1) << man_bits;
  const std::uint64_t m = b & ((1ULL << 52) - 1);
  if (((b >> 52) & 0x7ff) == 0x7ff) {  // inf stays inf; NaN becomes a quiet NaN
    return static_cast<std::uint16_t>(sign | inf | (m ? 1U << (man_bits - 1) : 0));
  }
  const std::uint64_t bits = round_magnitude(b, exp_bits, man_bits);
  return static_cast<std::uint16_t>(sign | (bits >= inf ? inf : bits));
}

// The value of a finite code's magnitude bits: subnormal when the exponent
// field is 0, normal otherwise (E4M3FN's top exponent included).
double finite_magnitude(unsigned bits, int exp_bits, int man_bits) {
  const int e = static_cast<int>(bits >> man_bits) & ((1 << exp_bits) - 1);
  const int m = static_cast<int>(bits) & ((1 << man_bits) - 1);
  const int bias = (1 << (exp_bits - 1)) - 1;
  if (e == 0) return std::ldexp(m, 1 - bias - man_bits);
  return std::ldexp(m + (1 << man_bits), e - bias - man_bits);
}

double narrow_to_double(std::uint16_t bits, int exp_bits, int man_bits) {
  const int e = (bits >> man_bits) & ((1 << exp_bits) - 1);
  const int m = bits & ((1 << man_bits) - 1);
  const double sign = (bits >> (exp_bits + man_bits)) & 1 ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return m ? std::nan("") : sign * HUGE_VAL;
  return sign * finite_magnitude(bits, exp_bits, man_bits);
}

// FP8 as the Hopper tensor cores take it (the OCP 8-bit formats). Rounding
// is to nearest even with "satfinite" saturation, as cuBLASLt's and
// Transformer Engine's conversions (PTX cvt.rn.satfinite) do: a finite
// value past the largest finite code, and an infinity too, becomes that
// code with the input's sign instead of overflowing, because a scaled
// tensor's outliers must stay usable numbers; NaN stays NaN.
struct Fp8Spec {
  int exp_bits;
  int man_bits;
  unsigned max_finite;  // the largest finite code's magnitude bits
  unsigned nan;         // the NaN code written (its magnitude bits)
};
// E4M3FN ("fn": finite, no infinities): bias 7, and the top exponent field
// holds normal numbers too (up to 1.75 * 2^8 = 448 at 0x7E); only mantissa
// all-ones there (0x7F, 0xFF) is NaN.
constexpr Fp8Spec kE4m3{4, 3, 0x7E, 0x7F};
// E5M2: IEEE-like with bias 15; exponent field 31 is inf (0x7C) and NaN
// (0x7D..0x7F). Largest finite 1.75 * 2^15 = 57344 at 0x7B; 0x7E is the
// quiet NaN written, as the bf16/fp16 path does.
constexpr Fp8Spec kE5m2{5, 2, 0x7B, 0x7E};

std::uint8_t round_to_fp8(double x, const Fp8Spec& f) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  const auto sign = static_cast<unsigned>(b >> 63) << 7;
  if (std::isnan(x)) return static_cast<std::uint8_t>(sign | f.nan);
  if (std::isinf(x)) return static_cast<std::uint8_t>(sign | f.max_finite);
  const std::uint64_t bits = round_magnitude(b, f.exp_bits, f.man_bits);
  return static_cast<std::uint8_t>(sign | (bits > f.max_finite ? f.max_finite : bits));
}

double fp8_to_double(std::uint8_t bits, const Fp8Spec& f, bool has_inf) {
  const unsigned mag = bits & 0x7FU;
  const double sign = bits & 0x80U ? -1.0 : 1.0;
  if (mag > f.max_finite) {  // past the finite codes: E5M2's inf and NaNs, E4M3's NaN
    return has_inf && mag == (((1U << f.exp_bits) - 1) << f.man_bits) ? sign * HUGE_VAL
                                                                      : std::nan("");
  }
  return sign * finite_magnitude(mag, f.exp_bits, f.man_bits);
}

}  // namespace

std::uint16_t round_to_bf16_bits(double x) {
  return round_to_narrow(x, 8, 7);
}
std::uint16_t round_to_f16_bits(double x) {
  return round_to_narrow(x, 5, 10);
}
double bf16_bits_to_double(std::uint16_t bits) {
  return narrow_to_double(bits, 8, 7);
}
double f16_bits_to_double(std::uint16_t bits) {
  return narrow_to_double(bits, 5, 10);
}
std::uint8_t round_to_e4m3_bits(double x) {
  return round_to_fp8(x, kE4m3);
}
std::uint8_t round_to_e5m2_bits(double x) {
  return round_to_fp8(x, kE5m2);
}
double e4m3_bits_to_double(std::uint8_t bits) {
  return fp8_to_double(bits, kE4m3, false);
}
double e5m2_bits_to_double(std::uint8_t bits) {
  return fp8_to_double(bits, kE5m2, true);
}

void encode_element(double v, DType t, unsigned char* p) {
  const auto f = static_cast<float>(v);
  switch (t) {
    case DType::F32:
      std::memcpy(p, &f, 4);
      return;
    case DType::F64:
      std::memcpy(p, &v, 8);
      return;
    case DType::BF16:
    case DType::F16: {
      const std::uint16_t h = t == DType::BF16 ? round_to_bf16_bits(f) : round_to_f16_bits(f);
      std::memcpy(p, &h, 2);
      return;
    }
  }
}

double decode_element(const unsigned char* p, DType t) {
  switch (t) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::F64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::BF16:
    case DType::F16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return t == DType::BF16 ? bf16_bits_to_double(h) : f16_bits_to_double(h);
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace tinyllama
