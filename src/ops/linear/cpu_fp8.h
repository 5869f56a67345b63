#pragma once
// FP8 per-tensor scaling and the CPU reference of an FP8 GEMM (layer cpu):
// what the Hopper FP8 linear layers (cuBLASLt FP8 matmuls, issue 45) are
// checked against.
//
// The recipe is Transformer Engine's "current" (dynamic) per-tensor
// scaling: a tensor's amax gives a scale that maps it onto the format's
// range, x * scale is rounded to FP8 codes (core/narrow_float.h: nearest
// even, satfinite), and the GEMM multiplies the codes and undoes both
// scales on its fp32 result, as cuBLASLt's A and B scale pointers do
// (they hold the dequantisation factors, 1 / scale).
#include <cstddef>
#include <cstdint>

#include "ops/linear/fp8_format.h"

namespace tinyllama::cpu {

// E4M3 for weights and activations, E5M2 for gradients (ops/linear/fp8_format.h).
using tinyllama::Fp8Format;

// The largest finite value of the format: 448 or 57344.
double fp8_max_finite(Fp8Format f);

// The value of one code, exactly (NaN for a NaN code, +-inf for E5M2's).
double fp8_value(std::uint8_t code, Fp8Format f);

// max |x[i]| over n elements; NaN when any element is NaN (so the scale
// below falls back to 1 and the non-finite check sees the NaN), 0 for n = 0.
double amax(const float* x, std::size_t n);

// The quantisation scale for a tensor of that amax: max_finite / amax /
// 2^margin, so the largest element lands on the largest finite code (less
// `margin` binades of headroom). 1 when amax is 0 or not finite (nothing to
// scale by); clamped to FLT_MAX when amax is so small the quotient
// overflows fp32, as Transformer Engine does.
float fp8_scale_for(double amax, Fp8Format f, int margin = 0);

// The dequantisation factor the GEMM is handed: the fp32 reciprocal
// 1.0f / scale, as the device computes it.
float fp8_inverse_scale(float scale);

// out[i] = the code nearest in[i] * scale, the product taken in fp32 as the
// device's quantise kernel does, then rounded with the codec (nearest even;
// past the largest finite value it saturates).
void quantize_fp8(const float* in, std::size_t n, float scale, Fp8Format f, std::uint8_t* out);

// out[i] = value(in[i]) * fp8_inverse_scale(scale), rounded to fp32.
void dequantize_fp8(const std::uint8_t* in, std::size_t n, float scale, Fp8Format f, float* out);

// One FP8 operand of the GEMM: `rows` rows of K codes each, row-major, row
// r at codes + r * ld (ld >= K), quantised with `scale` (x * scale -> code).
struct Fp8Matrix {
  const std::uint8_t* codes;
  std::int64_t ld;
  Fp8Format format;
  float scale;
};

// C = (A . B^T) / (scale_a * scale_b): the product cuBLASLt's FP8 matmul
// computes in its only FP8 layout ("TN": both operands K-contiguous).
//   A: M rows of K codes (row-major [M, K], leading dimension a.ld).
//   B: N rows of K codes (row-major [N, K], leading dimension b.ld), e.g. a
//      Linear's weight [out, in] for the forward out = x . W^T.
//   C: row-major fp32 [M, N], element (i, j) at c[i * ldc + j], ldc >= N.
// C(i, j) = (sum_k value(A(i, k)) * value(B(j, k))) * inv_a * inv_b, with
// inv = fp8_inverse_scale(scale), summed in double in increasing k; then
// stored as fp32, or rounded to bf16 (round_to_bf16_bits, held in the
// float) when round_to_bf16, as the bf16 output the layers ask for.
// Throws std::invalid_argument for a negative size or a too small ld.
void gemm_fp8_reference(std::int64_t m, std::int64_t n, std::int64_t k, const Fp8Matrix& a,
                        const Fp8Matrix& b, float* c, std::int64_t ldc, bool round_to_bf16);

}  // namespace tinyllama::cpu
