#pragma once
// The two FP8 formats of the FP8 linear layers (issue 45), shared by the CPU
// reference (cpu_fp8.h) and the CUDA casts and GEMM (cuda_fp8_cast.h,
// cuda_gemm_fp8.h). The codecs are core/narrow_float.h's.
namespace tinyllama {

// E4M3 (E4M3FN: max 448, no inf) for weights and activations; E5M2 (max
// 57344) for gradients, whose range matters more than their precision.
enum class Fp8Format { E4M3, E5M2 };

// The largest finite value of the format, as a float: 448 or 57344.
constexpr float fp8_max_finite_f32(Fp8Format f) {
  return f == Fp8Format::E4M3 ? 448.0f : 57344.0f;
}

}  // namespace tinyllama
