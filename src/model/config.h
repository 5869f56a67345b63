#pragma once
// The model's shape (DESIGN §1), the precision and the batch shape.
// Validation lives here so every front end rejects the same
// inputs with the same one-line messages.
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace tinyllama {

struct ModelConfig {
  int vocab_size = 1000;
  int hidden_dim = 512;
  int num_layers = 8;
  int num_heads = 8;
  int num_kv_heads = 4;  // DESIGN default: H/2
  int ffn_dim = 2048;    // DESIGN default: 4*D
  double rms_eps = 1e-6;
  double rope_theta = 10000.0;

  int head_dim() const { return hidden_dim / num_heads; }
  int q_dim() const { return num_heads * head_dim(); }
  int kv_dim() const { return num_kv_heads * head_dim(); }
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  // The vocabulary rounded up to a multiple of 128: the LM-head GEMMs run
  // over this many rows of the embedding, the ones past vocab_size zero.
  // cuBLASLt keeps an odd dimension (GPT-2's 50257) off its fast kernels
  // in all three GEMMs (6-8x slower at the GPT-2-small size).
  std::int64_t padded_vocab() const { return (vocab_size + 127LL) / 128 * 128; }

  // Throws UsageError naming the first bad field, the value and what is allowed.
  void validate() const;

  // DESIGN §1 defaults for the fields derived from others. K = H/2 (GQA);
  // for odd H that would not divide H, so such models use plain multi-head
  // attention.
  static int default_kv_heads(int heads);
  // F = 4·D, computed wide: a huge hidden_dim is refused (UsageError naming
  // --hidden-dim), not wrapped.
  static int default_ffn_dim(int hidden_dim);
};

// fp32 is true fp32 (no TF32). AMP computes in bf16/fp16 with fp32 master
// weights and fp32 optimizer state.
//
// FP8 (issue 45) is bf16 AMP whose linear layers' GEMMs -- QKV, out
// projection, gate/up, down; forward, data and weight gradients -- may run
// on FP8 tensor cores: E4M3 weights and activations, E5M2 gradients, one
// scale per tensor from its amax (current scaling). The plan picks the
// GEMMs (StepPlan::fp8, model/fp8_plan.h); everything else is bf16 AMP's.
struct Precision {
  DType master = DType::F32;
  DType compute = DType::F32;
  bool fp8_linears = false;  // compute is bf16

  bool mixed() const { return master != compute; }
  // Statistics (RMSNorm rstd, attention log-sum-exp, per-row losses) stay in
  // fp32, or fp64 when the whole model runs in fp64 for gradient checks.
  DType stats() const { return compute == DType::F64 ? DType::F64 : DType::F32; }
  static Precision fp32() { return {DType::F32, DType::F32}; }
  static Precision fp64() { return {DType::F64, DType::F64}; }
  static Precision amp(DType low) { return {DType::F32, low}; }
  static Precision amp_fp8() { return {DType::F32, DType::BF16, true}; }
};

struct BatchShape {
  int batch = 8;
  int seq = 256;
  std::int64_t tokens() const { return static_cast<std::int64_t>(batch) * seq; }
};

}  // namespace tinyllama
