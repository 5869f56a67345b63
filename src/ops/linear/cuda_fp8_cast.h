#pragma once
// The CUDA side of FP8 per-tensor scaling (issue 45): a tensor's amax, the
// scale it gives, and the casts of bf16/fp32 tensors to FP8 codes, each the
// device twin of a function of cpu_fp8.h and equal to it bit for bit:
//
//   fp8_amax               cpu::amax            max |x| (NaN when any x is)
//   fp8_scale_from_amax    cpu::fp8_scale_for   and cpu::fp8_inverse_scale
//   fp8_cast               cpu::quantize_fp8    x * scale in fp32, then the
//                                               nearest code, saturating
//   fp8_cast_transpose     the same, writing the [C, R] transpose as well
//
// The scale stays on the device (a pointer, never read by the host), so a
// step's casts follow its amax without a synchronisation and can be
// captured in a graph. cuBLASLt's FP8 GEMM takes only the "TN" layout
// (cuda_gemm_fp8.h: both operands K-contiguous), so the backward pass needs
// the transposes of the activations and the weights: fp8_cast_transpose
// makes both copies from one read.
//
// One exception to "bit for bit": a NaN input becomes the hardware's
// canonical NaN code (cvt.rn.satfinite), which may differ in sign or
// payload from the CPU codec's (0x7F/0xFF for E4M3, 0x7E/0xFE for E5M2);
// both are NaN, and the amax (NaN) has already flagged the tensor.
//
// FP8 outputs are raw codes (one byte each, row-major with a row stride in
// bytes); inputs are Mats of float32 or bfloat16 (float16 is accepted too).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"
#include "ops/linear/fp8_format.h"

namespace tinyllama::cuda {

// How a cast reads x: as stored, or (float32 only) as its values rounded to
// bf16 first -- an fp32 master weight whose bf16 copy is not kept gives that
// copy's codes and amax (Fp8Tensor::rounds_to_bf16).
enum class Fp8Source { AsStored, Bf16OfF32 };

// An FP8 matrix on the device: rows x cols codes, row r at codes + r * ld.
struct Fp8View {
  std::uint8_t* codes = nullptr;
  std::int64_t ld = 0;  // codes (bytes) between consecutive rows, >= cols
};

// *amax = max |x| over every element of x (its padding excluded); NaN when
// an element is NaN, 0 for an empty x. Deterministic: the maximum of the
// values' bit patterns, which for non-negative floats orders as the values
// do (a NaN's bits, sign cleared, are above +inf's). Zeroes *amax first, on
// the stream.
void fp8_amax(const Mat& x, float* amax, cudaStream_t stream,
              Fp8Source source = Fp8Source::AsStored);

// From the device amax: *scale = max_finite(f) / amax / 2^margin (clamped
// to FLT_MAX), 1 when amax is 0 or not finite; *inverse_scale = 1 / *scale
// in fp32 (the dequantisation factor the GEMM takes). One thread; either
// output pointer may be null.
void fp8_scale_from_amax(const float* amax, Fp8Format f, int margin, float* scale,
                         float* inverse_scale, cudaStream_t stream);

// out = the FP8 codes of x * (*scale): the product in fp32, then rounded to
// nearest even and saturated to the largest finite code ("satfinite").
// out must hold x.rows rows of x.cols codes (out.ld >= x.cols).
// With amax (delayed scaling): *amax is raised to max |x| as the cast
// reads x (atomically, the bit-pattern maximum as fp8_amax's; never
// zeroed here), so the next step's scale needs no pass of its own.
void fp8_cast(const Mat& x, const float* scale, Fp8Format f, Fp8View out, cudaStream_t stream,
              float* amax = nullptr, Fp8Source source = Fp8Source::AsStored);

// fp8_cast into out, and its transpose into out_t: out_t holds x.cols rows
// of x.rows codes (out_t.ld >= x.rows), out_t(c, r) == out(r, c). Either
// output may be left out (codes == nullptr) to write only the other.
void fp8_cast_transpose(const Mat& x, const float* scale, Fp8Format f, Fp8View out, Fp8View out_t,
                        cudaStream_t stream, float* amax = nullptr,
                        Fp8Source source = Fp8Source::AsStored);

// Delayed scaling's step boundary (LinearOps::fp8_update_scales, the twin
// of cpu::update_fp8_scales): `count` blocks of kFp8Block floats
// (ops/linear/fp8_tensor.h) at `blocks`, one thread each.
void fp8_update_scales(float* blocks, int count, Fp8Format f, cudaStream_t stream);

}  // namespace tinyllama::cuda
