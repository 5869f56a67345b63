#pragma once
// The model's shape (DESIGN §1) and the optimisation toggles of a level
// (DESIGN §2). Validation lives here so every front end rejects the same
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

  // Throws UsageError naming the first bad field, the value and what is allowed.
  void validate() const;
};

// Independent toggles; a level (v1..v4) is a preset of them.
struct LevelOptions {
  bool qkv_fusion = true;
  bool swiglu_fusion = true;
  bool flash_attention = true;
  bool cuda_graphs = true;
  // One AdamW sweep over the whole flat state block that also writes the
  // low-precision compute copy under AMP, instead of one launch per tensor
  // and a separate convert pass. DESIGN §2 lists it under v3; v2 takes it
  // early for issue 4's speed target.
  bool fused_optimizer = true;

  static LevelOptions v1() { return {false, false, false, false, false}; }
  static LevelOptions v2() { return {true, true, true, true, true}; }
  std::string describe() const;
};

// fp32 is true fp32 (no TF32). AMP computes in bf16/fp16 with fp32 master
// weights and fp32 optimizer state.
struct Precision {
  DType master = DType::F32;
  DType compute = DType::F32;

  bool mixed() const { return master != compute; }
  // Statistics (RMSNorm rstd, attention log-sum-exp, per-row losses) stay in
  // fp32, or fp64 when the whole model runs in fp64 for gradient checks.
  DType stats() const { return compute == DType::F64 ? DType::F64 : DType::F32; }
  static Precision fp32() { return {DType::F32, DType::F32}; }
  static Precision fp64() { return {DType::F64, DType::F64}; }
  static Precision amp(DType low) { return {DType::F32, low}; }
};

// With the fused optimizer in a captured step, each layer's parameters are
// updated during the backward pass as soon as its gradients are final, on
// a parallel branch of the graph, and the optimizer phase sweeps only the
// embedding and the final norm. Not under fp16: there every update waits
// for the overflow check of the whole gradient.
inline bool updates_layers_in_backward(const LevelOptions& level, const Precision& p) {
  return level.fused_optimizer && level.cuda_graphs && p.compute != DType::F16;
}

struct BatchShape {
  int batch = 8;
  int seq = 256;
  std::int64_t tokens() const { return static_cast<std::int64_t>(batch) * seq; }
};

}  // namespace tinyllama
