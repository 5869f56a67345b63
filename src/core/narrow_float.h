#pragma once
// bf16 and fp16 on the host: rounding to nearest even and back, exactly,
// and one stored element of any dtype to and from a double. Shared by the
// safetensors I/O, the kernel bench and the GPU tests.
#include <cstdint>

#include "core/dtype.h"

namespace tinyllama {

// Rounding goes straight from double (no detour through float, which would
// round twice).
std::uint16_t round_to_bf16_bits(double x);
std::uint16_t round_to_f16_bits(double x);
double bf16_bits_to_double(std::uint16_t bits);
double f16_bits_to_double(std::uint16_t bits);

// Stores v at p in dtype t, through float first for the 16-bit dtypes, as
// the device's own fp32 -> 16-bit casts do.
void encode_element(double v, DType t, unsigned char* p);
// The element stored at p, exactly.
double decode_element(const unsigned char* p, DType t);

}  // namespace tinyllama
