#pragma once
// A tensor quantised to FP8 with one per-tensor scale (issue 45): the
// operand the FP8 linear layers' GEMMs read (LinearOps::quantize_fp8 and
// gemm_fp8). The codes live in the backend's memory (the activation arena);
// so do the three fp32 scalars beside them.
//
// Either copy may be absent: the forward GEMM reads a row-major copy, the
// weight gradient's the transposed one (cuBLASLt's FP8 GEMM takes only
// K-contiguous operands, cuda_gemm_fp8.h), and a copy no GEMM reads is not
// made.
#include <cstdint>

#include "ops/linear/fp8_format.h"

namespace tinyllama {

// Where the scalars sit in Fp8Tensor::scalars: 16 bytes per tensor, the
// inverse first, because cuBLASLt's FP8 matmul refuses a scale pointer
// that is not 16-byte aligned ("not supported": an H200 refused the inverse
// at byte 8 of its block, and ran it at byte 0).
enum Fp8Scalar : int {
  kFp8Inverse = 0,  // 1 / scale: what the GEMM multiplies its result by
  kFp8Scale = 1,    // x * scale -> code (cpu::fp8_scale_for)
  kFp8Amax = 2,     // max |x| of the source tensor (under delayed scaling: of this step's so far)
  kFp8Scalars = 4,  // one float of padding
  // Delayed scaling's amax history follows (kFp8History floats, newest
  // first); a block of kFp8Block floats keeps the next block's inverse
  // 16-byte aligned too.
  kFp8HistoryAt = kFp8Scalars,
};
inline constexpr int kFp8History = 16;
inline constexpr int kFp8Block = kFp8Scalars + kFp8History;
static_assert(kFp8Block % 4 == 0, "a block must keep the next one's inverse 16-byte aligned");

struct Fp8Tensor {
  Fp8Format format = Fp8Format::E4M3;
  std::int64_t rows = 0;  // the source tensor's shape
  std::int64_t cols = 0;
  std::uint8_t* codes = nullptr;    // [rows, cols] row-major, or null
  std::int64_t ld = 0;              // bytes between rows of codes, >= cols
  std::uint8_t* codes_t = nullptr;  // [cols, rows] row-major (the transpose), or null
  std::int64_t ld_t = 0;            // bytes between rows of codes_t, >= rows
  float* scalars = nullptr;         // a block of kFp8Block floats (Fp8Scalar)
  // quantize_fp8 reads its fp32 source as the source's values rounded to
  // bf16 (nearest even) first: an fp32 master weight whose bf16 copy is not
  // kept (Fp8Linears::master_weights) gives that copy's codes, bit for bit.
  bool rounds_to_bf16 = false;

  // The same tensor with only the row-major (only the transposed) copy.
  Fp8Tensor direct_only() const {
    Fp8Tensor t = *this;
    t.codes_t = nullptr;
    return t;
  }
  Fp8Tensor transposed_only() const {
    Fp8Tensor t = *this;
    t.codes = nullptr;
    return t;
  }
};

// How quantize_fp8 scales.
enum class Fp8ScaleFrom {
  // Current scaling: the amax of this tensor now, then its scale.
  Amax,
  // The scale the Fp8Tensor's scalars already hold: the other copy of a
  // tensor quantised before (the backward's transposed copy of the forward's
  // input), so that both copies hold the same codes.
  Kept,
  // Delayed scaling (Transformer Engine's "delayed"): the scale the block
  // holds, set by fp8_update_scales from the amax history of the steps
  // before, so the cast needs no amax pass first; the cast raises the
  // block's amax to max |x| as it goes, for the next update.
  History,
};

}  // namespace tinyllama
