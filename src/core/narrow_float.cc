#include "core/narrow_float.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace tinyllama {
namespace {

// Rounds to an IEEE binary format with `exp_bits` exponent and `man_bits`
// mantissa bits, ties to even, by integer arithmetic on the double's bits.
std::uint16_t round_to_narrow(double x, int exp_bits, int man_bits) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  const auto sign = static_cast<std::uint16_t>((b >> 63) << (exp_bits + man_bits));
  const int e = static_cast<int>((b >> 52) & 0x7ff);
  const std::uint64_t m = b & ((1ULL << 52) - 1);
  const std::uint32_t inf = ((1U << exp_bits) - 1) << man_bits;
  if (e == 0x7ff) {  // inf stays inf; NaN becomes a quiet NaN
    return static_cast<std::uint16_t>(sign | inf | (m ? 1U << (man_bits - 1) : 0));
  }
  if (e == 0) return sign;  // double subnormals are far below any narrow subnormal
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int narrow_e = e - 1023 + bias;  // biased exponent in the narrow format
  // Bits of the 53-bit significand to drop; more for narrow subnormals,
  // whose unit is fixed at the smallest normal exponent.
  const int shift = 52 - man_bits + (narrow_e >= 1 ? 0 : 1 - narrow_e);
  if (shift >= 64) return sign;  // below half the smallest subnormal
  const std::uint64_t full = (1ULL << 52) | m;
  std::uint64_t kept = full >> shift;
  const std::uint64_t rest = full & ((1ULL << shift) - 1);
  const std::uint64_t half = 1ULL << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  // For normals `kept` carries the implicit bit, which adds one to the
  // exponent field; a rounding carry moves into the exponent by itself.
  const std::uint64_t bits =
      narrow_e >= 1 ? (static_cast<std::uint64_t>(narrow_e - 1) << man_bits) + kept : kept;
  return static_cast<std::uint16_t>(sign | (bits >= inf ? inf : bits));
}

double narrow_to_double(std::uint16_t bits, int exp_bits, int man_bits) {
  const int e = (bits >> man_bits) & ((1 << exp_bits) - 1);
  const int m = bits & ((1 << man_bits) - 1);
  const int bias = (1 << (exp_bits - 1)) - 1;
  const double sign = (bits >> (exp_bits + man_bits)) & 1 ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return m ? std::nan("") : sign * HUGE_VAL;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - man_bits);
  return sign * std::ldexp(m + (1 << man_bits), e - bias - man_bits);
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
