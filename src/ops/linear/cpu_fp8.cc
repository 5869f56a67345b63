// FP8 scaling and the reference FP8 GEMM on the CPU (cpu_fp8.h).
//
// The GEMM sums products of code values in double: an E4M3 code value has
// a 4-bit significand, so each product is exact and so is the sum (E4M3's
// products span about 36 binades, far inside double's 53 bits; E5M2's span
// about 64, so only sums mixing extremes round). The two dequantisation
// factors multiply exactly (24-bit significands) and are applied once at
// the end: the result is the exact product rounded once, accurate enough to
// be what the device's fp32-accumulated FP8 GEMM is checked against.
#include "ops/linear/cpu_fp8.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/narrow_float.h"
#include "cpu/cpu_common.h"

namespace tinyllama::cpu {

double fp8_max_finite(Fp8Format f) {
  return f == Fp8Format::E4M3 ? 448.0 : 57344.0;
}

double fp8_value(std::uint8_t code, Fp8Format f) {
  return f == Fp8Format::E4M3 ? e4m3_bits_to_double(code) : e5m2_bits_to_double(code);
}

double amax(const float* x, std::size_t n) {
  double m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (std::isnan(a)) return a;
    if (a > m) m = a;
  }
  return m;
}

float fp8_scale_for(double amax, Fp8Format f, int margin) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  const double s = fp8_max_finite(f) / amax / std::ldexp(1.0, margin);
  const double most = std::numeric_limits<float>::max();
  return static_cast<float>(s > most ? most : s);
}

float fp8_inverse_scale(float scale) {
  return 1.0f / scale;
}

void quantize_fp8(const float* in, std::size_t n, float scale, Fp8Format f, std::uint8_t* out) {
  for (std::size_t i = 0; i < n; ++i) {
    const float x = in[i] * scale;  // fp32, as the device's kernel multiplies
    out[i] = f == Fp8Format::E4M3 ? round_to_e4m3_bits(x) : round_to_e5m2_bits(x);
  }
}

void dequantize_fp8(const std::uint8_t* in, std::size_t n, float scale, Fp8Format f, float* out) {
  const double inv = fp8_inverse_scale(scale);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(fp8_value(in[i], f) * inv);
}

void gemm_fp8_reference(std::int64_t m, std::int64_t n, std::int64_t k, const Fp8Matrix& a,
                        const Fp8Matrix& b, float* c, std::int64_t ldc, bool round_to_bf16) {
  const std::string op = "gemm_fp8_reference";
  require(m >= 0 && n >= 0 && k >= 0, op, "negative size");
  require(a.ld >= k && b.ld >= k, op,
          "an operand's leading dimension is smaller than K = " + std::to_string(k));
  require(ldc >= n, op, "ldc is smaller than N = " + std::to_string(n));
  // Each format's 256 code values looked up, not decoded per product.
  double a_value[256];
  double b_value[256];
  for (int code = 0; code < 256; ++code) {
    a_value[code] = fp8_value(static_cast<std::uint8_t>(code), a.format);
    b_value[code] = fp8_value(static_cast<std::uint8_t>(code), b.format);
  }
  const double dequant = static_cast<double>(fp8_inverse_scale(a.scale)) *
                         static_cast<double>(fp8_inverse_scale(b.scale));
  parallel_for(m, 2.0 * static_cast<double>(n * k), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::uint8_t* ai = a.codes + i * a.ld;
      for (std::int64_t j = 0; j < n; ++j) {
        const std::uint8_t* bj = b.codes + j * b.ld;
        double sum = 0;
        for (std::int64_t kk = 0; kk < k; ++kk) sum += a_value[ai[kk]] * b_value[bj[kk]];
        const double v = sum * dequant;
        c[i * ldc + j] = round_to_bf16
                             ? static_cast<float>(bf16_bits_to_double(round_to_bf16_bits(v)))
                             : static_cast<float>(v);
      }
    }
  });
}

}  // namespace tinyllama::cpu
