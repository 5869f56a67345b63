#pragma once
// Every activation buffer of a training step, laid out in one arena before
// step 1. Saved tensors (needed by backward) get a slot per layer; backward
// scratch is shared by all layers. The plan is pure arithmetic, so the memory
// estimate used to refuse runs that cannot fit is the same number the run
// allocates.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/mat.h"
#include "model/config.h"
#include "model/step_plan.h"
#include "ops/linear/fp8_tensor.h"

namespace tinyllama {

// A buffer's place in the arena: byte offset and 2-D shape.
struct Slot {
  std::int64_t offset = -1;  // -1: not used at this level
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DType dtype = DType::F32;
  std::int64_t ld = 0;  // row stride in elements, >= cols
  bool used() const { return offset >= 0; }
};

// FP8 codes: `bytes` bytes at `offset` of the arena (-1: not used).
struct CodeSlot {
  std::int64_t offset = -1;
  std::int64_t bytes = 0;
  bool used() const { return offset >= 0; }
};

// Under --amp-dtype float8 (StepPlan::fp8), the FP8 copies the linear
// GEMMs read and their scalars (ops/linear/fp8_tensor.h). The forward's
// copies of x and W are scratch, remade by each FP8 forward GEMM; their
// scalars are kept per layer, so the backward's transposed copies are cast
// with the forward's scale (no second amax) and hold the same codes. The
// copies the weight gradient reads on the side branch (dy^T, x^T) have a
// buffer per linear: the next layer's GEMM of that linear joins it first,
// as it does for the bf16 gradients it reads.
// The scalar blocks of one FP8 format, back to back (LinearOps::fp8_update_scales).
struct Fp8ScalarBlocks {
  float* blocks = nullptr;
  int count = 0;
  Fp8Format format = Fp8Format::E4M3;
};

struct Fp8Activations {
  // Blocks of kFp8Block floats (fp8_tensor.h), one per layer, linear and
  // operand: they outlive the step, as delayed scaling's history must.
  Slot scalars;       // fp32 [layers, kLinearKinds * 2 * kFp8Block]: x's, then W's (E4M3)
  Slot grad_scalars;  // fp32 [layers, kLinearKinds * kFp8Block]: dy's (E5M2)
  CodeSlot x, w;      // an FP8 forward's input and weight
  CodeSlot w_t;       // an FP8 data gradient's W^T
  std::array<CodeSlot, kLinearKinds> dy, dy_t, x_t;
  // Per layer under Fp8Linears::swiglu_keeps_codes: the down projection's
  // x^T, written by the forward's SwiGLU and kept for that layer's weight
  // gradient (x_t[Down] then unused).
  std::vector<CodeSlot> down_x_t;

  bool used() const { return scalars.used(); }
  // Views of the slots, in the arena at `arena`: each tensor holds only the
  // copies its pass reads (fp8_tensor.h).
  Fp8Tensor forward_input(void* arena, LinearKind k, int layer, LinearShape s) const;
  Fp8Tensor forward_weight(void* arena, LinearKind k, int layer, LinearShape s) const;
  Fp8Tensor backward_input(void* arena, LinearKind k, int layer, LinearShape s) const;
  Fp8Tensor backward_weight(void* arena, LinearKind k, int layer, LinearShape s) const;
  // dy with the row-major copy when `dgrad`, the transposed when `wgrad`.
  Fp8Tensor gradient(void* arena, LinearKind k, int layer, LinearShape s, bool dgrad,
                     bool wgrad) const;
  // The E4M3 blocks (x's and W's), then the E5M2 ones (dy's).
  std::array<Fp8ScalarBlocks, 2> scalar_blocks(void* arena) const;
};

struct LayerActivations {
  Slot residual_in;   // x entering the block [N, D]
  Slot norm1, rstd1;  // norm1 (and norm2): one slot for all layers under RecomputeNorms
  Slot qkv;           // after RoPE on the q and k columns [N, (H+2K)hd]
  Slot attn_out, lse;
  Slot probs;         // AttentionImpl::Materialized only [B*H*S, S]
  Slot residual_mid;  // h = x + Wo(attn) [N, D]
  Slot norm2, rstd2;
  Slot gate_up;    // [N, 2F]
  Slot silu_gate;  // SwigluImpl::Separate only [N, F]
  // silu(g) * u [N, F]; one slot for all layers under RecomputeNormsSwiglu;
  // a shape with no memory under Fp8Linears::swiglu_keeps_codes (shaped()).
  Slot ffn_hidden;
};

// One buffer of the arena, named for reports: "layer3.qkv", "final_norm",
// "d_qkv". kind groups buffers for the memory breakdown (kActivationKinds).
struct ActivationBuffer {
  std::string name;
  const char* kind = "";
  Slot slot;
  std::int64_t bytes = 0;  // reserved in the arena, alignment included
  // Backward scratch over the logits' bytes and those of the other buffers
  // dead by then (ActivationPlan::scratch_over_logits): only the layers'
  // backward touches it, and never what lies under it.
  bool over_logits = false;
};

// The kinds of ActivationBuffer, in the order reports list them.
inline constexpr const char* kActivationKinds[] = {
    "residual_stream",  "norm_outputs",    "norm_stats",        "qkv",    "attention_outputs",
    "attention_stats",  "attention_probs", "ffn_intermediates", "logits", "losses",
    "backward_scratch", "fp8_operands"};

struct ActivationPlan {
  ActivationPlan(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan);

  std::vector<LayerActivations> layers;
  Slot residual_out;  // output of the last block [N, D]
  Slot final_norm, final_rstd;
  // [N, V] with row stride ModelConfig::padded_vocab(): the LM-head GEMMs
  // write and read all padded columns (zero), the loss the first V;
  // backward overwrites it with dlogits. LossImpl::Chunked: one chunk's
  // rows [StepPlan::loss_chunk_rows, V], reused by each chunk in turn.
  Slot logits;
  Slot losses;  // [N, 1]
  // Backward scratch, shared across layers.
  Slot d_residual_a, d_residual_b, d_norm_out, d_norm_in;
  // d_gate_up is unused with its shape set under
  // Fp8Linears::swiglu_grad_codes_only (shaped()).
  Slot d_qkv, d_attn, d_gate_up, d_ffn_hidden, d_silu_gate;
  // fp32 [N, D] under AMP with separate QKV or gate-up GEMMs: their data
  // gradients add up here, as autograd sums a tensor's gradients in fp32
  // when each use cast it separately, before one rounding to d_norm_out.
  Slot d_norm_sum;
  Fp8Activations fp8;
  // ActivationsImpl::RecomputeNorms: every layer's norm1 (norm2) is one
  // shared slot, remade by the backward pass.
  bool norms_shared = false;
  // ActivationsImpl::RecomputeNormsSwiglu: every layer's ffn_hidden is one
  // shared slot too, remade by the backward pass.
  bool hidden_shared = false;
  // StepPlan::scratch_over_logits: d_residual_b, d_norm_in, d_qkv, d_attn,
  // d_gate_up, d_silu_gate, d_norm_sum and the FP8 backward copies of every
  // linear but the down projection lie over the buffers dead before the
  // last layer's SwiGLU backward: residual_out, final_norm (unless the plan
  // keeps it), the logits and the FP8 forward copies (fp8.x, fp8.w).
  bool scratch_over_logits = false;
  // The final norm's output lies under that scratch too (nothing reads it
  // after the step: StepPlan::keeps_final_norm).
  bool final_norm_under_scratch = false;
  std::int64_t bytes = 0;

  Mat view(void* arena, const Slot& s) const;
  // view(), or for an unused slot with a shape, that shape with no memory
  // (data null): an op told to keep nothing there writes nothing there.
  Mat shaped(void* arena, const Slot& s) const;
  // Every used slot, by offset: together they cover the arena, and only the
  // buffers over_logits share bytes (with residual_out, final_norm, the
  // logits and the FP8 forward copies).
  std::vector<ActivationBuffer> buffers() const;

 private:
  // ld: the row stride in elements (0: cols, rows packed).
  Slot take(std::int64_t rows, std::int64_t cols, DType dtype, std::int64_t ld = 0);
  CodeSlot take_codes(std::int64_t bytes);
  void plan_fp8_forward(const ModelConfig& cfg, BatchShape shape, const Fp8Linears& use);
  void plan_fp8_backward(const ModelConfig& cfg, BatchShape shape, const Fp8Linears& use,
                         bool after_join);
};

}  // namespace tinyllama
