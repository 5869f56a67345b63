#pragma once
// bf16, fp16 and the two FP8 formats on the host: rounding to nearest even
// and back, exactly, and one stored element of any dtype to and from a
// double. Shared by the safetensors I/O, the kernel bench, the GPU tests and
// the FP8 GEMM's reference (ops/linear/cpu_fp8.h).
#include <cstdint>

#include "core/dtype.h"

namespace tinyllama {

// Rounding goes straight from double (no detour through float, which would
// round twice).
std::uint16_t round_to_bf16_bits(double x);
std::uint16_t round_to_f16_bits(double x);
double bf16_bits_to_double(std::uint16_t bits);
double f16_bits_to_double(std::uint16_t bits);

// FP8 (the OCP 8-bit formats Hopper's tensor cores multiply):
//   E4M3 is the "fn" variant: bias 7, subnormals, no infinities; the top
//     exponent field holds normals up to 448 (0x7E) and only 0x7F/0xFF are
//     NaN. Weights and activations use it (one more mantissa bit).
//   E5M2: bias 15, IEEE-like with subnormals, inf (0x7C) and NaNs; largest
//     finite 57344 (0x7B). Gradients use it (more range).
// Rounding is to nearest, ties to even, and saturates ("satfinite", as the
// PTX cvt.rn.satfinite conversion cuBLASLt and Transformer Engine use): a
// value past the largest finite one, infinity included, becomes the
// largest finite value with its sign. NaN gives a NaN code (0x7F for E4M3,
// 0x7E for E5M2, with the input's sign). Decoding is exact.
std::uint8_t round_to_e4m3_bits(double x);
std::uint8_t round_to_e5m2_bits(double x);
double e4m3_bits_to_double(std::uint8_t bits);
double e5m2_bits_to_double(std::uint8_t bits);

// Stores v at p in dtype t, through float first for the 16-bit dtypes, as
// the device's own fp32 -> 16-bit casts do.
void encode_element(double v, DType t, unsigned char* p);
// The element stored at p, exactly.
double decode_element(const unsigned char* p, DType t);

}  // namespace tinyllama
