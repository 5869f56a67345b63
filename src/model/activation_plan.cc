#include "model/activation_plan.h"

#include <algorithm>
#include <utility>

namespace tinyllama {

// 256-byte alignment for every buffer: what cuBLASLt and 16-byte vector
// loads want, with room to spare.
constexpr std::int64_t kAlignBytes = 256;

namespace {

// What a buffer of `size` bytes reserves in the arena.
std::int64_t aligned_size(std::int64_t size) {
  return (size + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
}

}  // namespace

ActivationPlan::ActivationPlan(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) {
  const bool materialized = plan.ops.attention == AttentionImpl::Materialized;
  const bool separate_swiglu = plan.ops.swiglu == SwigluImpl::Separate;
  const std::int64_t n = shape.tokens();
  const std::int64_t d = cfg.hidden_dim;
  const std::int64_t f = cfg.ffn_dim;
  const DType act = plan.precision.compute;
  const DType st = plan.precision.stats();
  const std::int64_t bh = static_cast<std::int64_t>(shape.batch) * cfg.num_heads;

  // RecomputeNorms: one normalised input of each kind for all layers (the
  // backward pass remakes a layer's before the GEMMs that read it).
  norms_shared = recomputes_norms(plan.ops.activations);
  const Slot shared_norm1 = norms_shared ? take(n, d, act) : Slot{};
  const Slot shared_norm2 = norms_shared ? take(n, d, act) : Slot{};
  // RecomputeNormsSwiglu: one SwiGLU output for all layers as well.
  hidden_shared = recomputes_swiglu(plan.ops.activations);
  const Slot shared_hidden = hidden_shared ? take(n, f, act) : Slot{};
  for (int l = 0; l < cfg.num_layers; ++l) {
    LayerActivations a;
    a.residual_in = take(n, d, act);
    a.norm1 = norms_shared ? shared_norm1 : take(n, d, act);
    a.rstd1 = take(n, 1, st);
    a.qkv = take(n, cfg.qkv_dim(), act);
    a.attn_out = take(n, cfg.q_dim(), act);
    a.lse = take(bh, shape.seq, st);
    if (materialized) a.probs = take(bh * shape.seq, shape.seq, act);
    a.residual_mid = take(n, d, act);
    a.norm2 = norms_shared ? shared_norm2 : take(n, d, act);
    a.rstd2 = take(n, 1, st);
    a.gate_up = take(n, 2 * f, act);
    if (separate_swiglu) a.silu_gate = take(n, f, act);
    if (plan.fp8.swiglu_keeps_codes) {
      a.ffn_hidden = Slot{-1, n, f, act, f};
    } else {
      a.ffn_hidden = hidden_shared ? shared_hidden : take(n, f, act);
    }
    layers.push_back(a);
  }
  final_norm_under_scratch = plan.scratch_over_logits && !plan.keeps_final_norm;
  if (!final_norm_under_scratch) final_norm = take(n, d, act);
  final_rstd = take(n, 1, st);
  losses = take(n, 1, st);
  // The backward scratch the head or the loss writes, or that the last
  // layer's backward writes before it joins the head's weight gradient.
  d_residual_a = take(n, d, act);
  d_norm_out = take(n, d, act);
  d_ffn_hidden = take(n, f, act);
  // What is dead once the last layer's backward joins the head's weight
  // gradient, before its SwiGLU backward (Model::backward_pass): the block
  // output (the final norm's backward, before the layers', read it last),
  // the final norm's output and the logits (that weight gradient is their
  // last reader; chunked: one chunk's rows, reused by every chunk) and the
  // FP8 forward copies.
  const std::int64_t region_start = bytes;
  residual_out = take(n, d, act);
  if (final_norm_under_scratch) final_norm = take(n, d, act);
  const std::int64_t logit_rows = plan.ops.loss == LossImpl::Chunked ? plan.loss_chunk_rows : n;
  logits = take(logit_rows, cfg.vocab_size, act, cfg.padded_vocab());
  if (plan.fp8.any()) plan_fp8_forward(cfg, shape, plan.fp8);
  const std::int64_t dead_end = bytes;
  // The rest of the scratch is first written after that join: it can take
  // those bytes.
  scratch_over_logits = plan.scratch_over_logits;
  if (scratch_over_logits) bytes = region_start;
  d_residual_b = take(n, d, act);
  if (plan.ops.norm == NormImpl::Plain) d_norm_in = take(n, d, act);
  d_qkv = take(n, cfg.qkv_dim(), act);
  d_attn = take(n, cfg.q_dim(), act);
  // Only its FP8 codes under swiglu_grad_codes_only: its shape, no memory.
  d_gate_up =
      plan.fp8.swiglu_grad_codes_only ? Slot{-1, n, 2 * f, act, 2 * f} : take(n, 2 * f, act);
  if (separate_swiglu) d_silu_gate = take(n, f, act);
  const bool separate_gemms = plan.ops.qkv_gemm == GemmGrouping::Separate ||
                              plan.ops.gate_up_gemm == GemmGrouping::Separate;
  if (separate_gemms && plan.precision.mixed()) d_norm_sum = take(n, d, DType::F32);
  if (plan.fp8.any()) plan_fp8_backward(cfg, shape, plan.fp8, /*after_join=*/true);
  bytes = std::max(bytes, dead_end);
  if (plan.fp8.any()) plan_fp8_backward(cfg, shape, plan.fp8, /*after_join=*/false);
}

// The FP8 forward's copies of x and W, scratch each FP8 forward GEMM
// remakes, each sized for the largest tensor it holds.
void ActivationPlan::plan_fp8_forward(const ModelConfig& cfg, BatchShape shape,
                                      const Fp8Linears& use) {
  std::int64_t x = 0, w = 0;
  for (int k = 0; k < kLinearKinds; ++k) {
    const auto kind = static_cast<LinearKind>(k);
    if (!use.at(kind, LinearPass::Forward)) continue;
    const LinearShape s = linear_shape(cfg, shape, kind);
    x = std::max(x, s.tokens * s.in);
    w = std::max(w, s.out * s.in);
  }
  if (x > 0) fp8.x = take_codes(x);
  if (w > 0) fp8.w = take_codes(w);
}

namespace {

// Whether a linear's backward copies (dy, dy^T, x^T) are first written after
// the last layer's backward joins the head's weight gradient: all but the
// down projection's, whose data gradient comes before that join.
bool fp8_copies_after_join(LinearKind kind) {
  return kind != LinearKind::Down;
}

}  // namespace

// The backward's code buffers of the linears `use` puts in FP8: those first
// written after that join (after_join) or the others, with the scalars.
void ActivationPlan::plan_fp8_backward(const ModelConfig& cfg, BatchShape shape,
                                       const Fp8Linears& use, bool after_join) {
  if (!after_join) {
    fp8.scalars = take(cfg.num_layers, kLinearKinds * 2 * kFp8Block, DType::F32);
    fp8.grad_scalars = take(cfg.num_layers, kLinearKinds * kFp8Block, DType::F32);
  }
  std::int64_t w_t = 0;
  for (int k = 0; k < kLinearKinds; ++k) {
    const auto kind = static_cast<LinearKind>(k);
    const LinearShape s = linear_shape(cfg, shape, kind);
    if (!after_join && use.at(kind, LinearPass::Dgrad)) w_t = std::max(w_t, s.out * s.in);
    if (fp8_copies_after_join(kind) != after_join) continue;
    if (use.at(kind, LinearPass::Dgrad)) fp8.dy[k] = take_codes(s.tokens * s.out);
    if (!use.at(kind, LinearPass::Wgrad)) continue;
    fp8.dy_t[k] = take_codes(s.tokens * s.out);
    if (kind == LinearKind::Down && use.swiglu_keeps_codes) {
      for (int l = 0; l < cfg.num_layers; ++l) fp8.down_x_t.push_back(take_codes(s.tokens * s.in));
    } else {
      fp8.x_t[k] = take_codes(s.tokens * s.in);
    }
  }
  // W^T: every data gradient's, the down projection's (before the join) first.
  if (!after_join && w_t > 0) fp8.w_t = take_codes(w_t);
}

CodeSlot ActivationPlan::take_codes(std::int64_t size) {
  CodeSlot s{bytes, size};
  bytes += aligned_size(size);
  return s;
}

namespace {

std::uint8_t* codes_at(void* arena, const CodeSlot& s) {
  return s.used() ? static_cast<std::uint8_t*>(arena) + s.offset : nullptr;
}

float* floats_at(void* arena, const Slot& s, std::int64_t index) {
  return reinterpret_cast<float*>(static_cast<char*>(arena) + s.offset) + index;
}

// A tensor of shape [rows, cols] with its copies packed (ld = cols, ld_t = rows).
Fp8Tensor packed(Fp8Format f, std::int64_t rows, std::int64_t cols, std::uint8_t* codes,
                 std::uint8_t* codes_t, float* scalars) {
  return Fp8Tensor{f, rows, cols, codes, cols, codes_t, rows, scalars};
}

// The layer's scalars of linear k: x's block, then W's.
float* layer_scalars(void* arena, const Slot& scalars, LinearKind k, int layer) {
  return floats_at(arena, scalars, (layer * kLinearKinds + static_cast<int>(k)) * 2 * kFp8Block);
}

}  // namespace

Fp8Tensor Fp8Activations::forward_input(void* arena, LinearKind k, int layer, LinearShape s) const {
  return packed(Fp8Format::E4M3, s.tokens, s.in, codes_at(arena, x), nullptr,
                layer_scalars(arena, scalars, k, layer));
}

Fp8Tensor Fp8Activations::forward_weight(void* arena, LinearKind k, int layer,
                                         LinearShape s) const {
  return packed(Fp8Format::E4M3, s.out, s.in, codes_at(arena, w), nullptr,
                layer_scalars(arena, scalars, k, layer) + kFp8Block);
}

Fp8Tensor Fp8Activations::backward_input(void* arena, LinearKind k, int layer,
                                         LinearShape s) const {
  Fp8Tensor t = forward_input(arena, k, layer, s);
  t.codes = nullptr;
  const bool per_layer = k == LinearKind::Down && !down_x_t.empty();
  t.codes_t = codes_at(arena, per_layer ? down_x_t[layer] : x_t[static_cast<int>(k)]);
  return t;
}

Fp8Tensor Fp8Activations::backward_weight(void* arena, LinearKind k, int layer,
                                          LinearShape s) const {
  Fp8Tensor t = forward_weight(arena, k, layer, s);
  t.codes = nullptr;
  t.codes_t = codes_at(arena, w_t);
  return t;
}

Fp8Tensor Fp8Activations::gradient(void* arena, LinearKind k, int layer, LinearShape s, bool dgrad,
                                   bool wgrad) const {
  const int i = static_cast<int>(k);
  return packed(Fp8Format::E5M2, s.tokens, s.out, dgrad ? codes_at(arena, dy[i]) : nullptr,
                wgrad ? codes_at(arena, dy_t[i]) : nullptr,
                floats_at(arena, grad_scalars, (layer * kLinearKinds + i) * kFp8Block));
}

std::array<Fp8ScalarBlocks, 2> Fp8Activations::scalar_blocks(void* arena) const {
  const auto blocks = [&](const Slot& s, Fp8Format f) {
    return Fp8ScalarBlocks{floats_at(arena, s, 0), static_cast<int>(s.rows * s.cols / kFp8Block),
                           f};
  };
  return {blocks(scalars, Fp8Format::E4M3), blocks(grad_scalars, Fp8Format::E5M2)};
}

Slot ActivationPlan::take(std::int64_t rows, std::int64_t cols, DType dtype, std::int64_t ld) {
  const auto es = static_cast<std::int64_t>(dtype_size(dtype));
  ld = std::max(ld, cols);
  Slot s{bytes, rows, cols, dtype, ld};
  const std::int64_t size = rows * ld * es;
  bytes += aligned_size(size);
  return s;
}

namespace {

std::int64_t reserved_bytes(const Slot& s) {
  return aligned_size(s.rows * s.ld * static_cast<std::int64_t>(dtype_size(s.dtype)));
}

// The FP8 buffers as ActivationBuffers. DType has no byte type: a code
// buffer is one row of bytes / 2 two-byte elements (its bytes are even: the
// FP8 GEMMs' dimensions are multiples of 16).
// over_logits: the copies first written after the join lie over the logits.
void add_fp8_buffers(const Fp8Activations& fp8, bool over_logits,
                     std::vector<ActivationBuffer>& out) {
  auto add_codes = [&](std::string name, const CodeSlot& s, bool over = false) {
    if (!s.used()) return;
    const std::int64_t halves = (s.bytes + 1) / 2;
    out.push_back({std::move(name), "fp8_operands", Slot{s.offset, 1, halves, DType::BF16, halves},
                   aligned_size(s.bytes)});
    out.back().over_logits = over;
  };
  auto add_slot = [&](std::string name, const Slot& s) {
    if (s.used()) out.push_back({std::move(name), "fp8_operands", s, reserved_bytes(s)});
  };
  add_slot("fp8.scalars", fp8.scalars);
  add_slot("fp8.grad_scalars", fp8.grad_scalars);
  add_codes("fp8.x", fp8.x);
  add_codes("fp8.w", fp8.w);
  add_codes("fp8.w_t", fp8.w_t);
  for (int k = 0; k < kLinearKinds; ++k) {
    const auto kind = static_cast<LinearKind>(k);
    const std::string p = std::string("fp8.") + linear_name(kind) + ".";
    const bool over = over_logits && fp8_copies_after_join(kind);
    add_codes(p + "dy", fp8.dy[k], over);
    add_codes(p + "dy_t", fp8.dy_t[k], over);
    add_codes(p + "x_t", fp8.x_t[k], over);
  }
  for (std::size_t l = 0; l < fp8.down_x_t.size(); ++l) {
    add_codes("layer" + std::to_string(l) + ".fp8.down.x_t", fp8.down_x_t[l]);
  }
}

}  // namespace

std::vector<ActivationBuffer> ActivationPlan::buffers() const {
  std::vector<ActivationBuffer> out;
  auto add = [&](std::string name, const char* kind, const Slot& s) {
    if (s.used()) out.push_back({std::move(name), kind, s, reserved_bytes(s)});
  };
  if (norms_shared && !layers.empty()) {
    add("norm1", "norm_outputs", layers[0].norm1);
    add("norm2", "norm_outputs", layers[0].norm2);
  }
  if (hidden_shared && !layers.empty()) {
    add("ffn_hidden", "ffn_intermediates", layers[0].ffn_hidden);
  }
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerActivations& a = layers[l];
    const std::string p = "layer" + std::to_string(l) + ".";
    add(p + "residual_in", "residual_stream", a.residual_in);
    if (!norms_shared) add(p + "norm1", "norm_outputs", a.norm1);
    add(p + "rstd1", "norm_stats", a.rstd1);
    add(p + "qkv", "qkv", a.qkv);
    add(p + "attn_out", "attention_outputs", a.attn_out);
    add(p + "lse", "attention_stats", a.lse);
    add(p + "probs", "attention_probs", a.probs);
    add(p + "residual_mid", "residual_stream", a.residual_mid);
    if (!norms_shared) add(p + "norm2", "norm_outputs", a.norm2);
    add(p + "rstd2", "norm_stats", a.rstd2);
    add(p + "gate_up", "ffn_intermediates", a.gate_up);
    add(p + "silu_gate", "ffn_intermediates", a.silu_gate);
    if (!hidden_shared) add(p + "ffn_hidden", "ffn_intermediates", a.ffn_hidden);
  }
  add("residual_out", "residual_stream", residual_out);
  add("final_norm", "norm_outputs", final_norm);
  add("final_rstd", "norm_stats", final_rstd);
  add("logits", "logits", logits);
  add("losses", "losses", losses);
  add("d_residual_a", "backward_scratch", d_residual_a);
  add("d_norm_out", "backward_scratch", d_norm_out);
  add("d_ffn_hidden", "backward_scratch", d_ffn_hidden);
  const std::pair<const char*, const Slot*> over_logits[] = {{"d_residual_b", &d_residual_b},
                                                             {"d_norm_in", &d_norm_in},
                                                             {"d_qkv", &d_qkv},
                                                             {"d_attn", &d_attn},
                                                             {"d_gate_up", &d_gate_up},
                                                             {"d_silu_gate", &d_silu_gate},
                                                             {"d_norm_sum", &d_norm_sum}};
  for (const auto& [name, slot] : over_logits) {
    add(name, "backward_scratch", *slot);
    if (slot->used()) out.back().over_logits = scratch_over_logits;
  }
  add_fp8_buffers(fp8, scratch_over_logits, out);
  // By offset; where the scratch starts over the logits, the logits first.
  std::sort(out.begin(), out.end(), [](const ActivationBuffer& a, const ActivationBuffer& b) {
    return std::pair(a.slot.offset, a.over_logits) < std::pair(b.slot.offset, b.over_logits);
  });
  return out;
}

Mat ActivationPlan::view(void* arena, const Slot& s) const {
  if (!s.used()) return Mat();
  return Mat(static_cast<char*>(arena) + s.offset, s.dtype, s.rows, s.cols, s.ld);
}

Mat ActivationPlan::shaped(void* arena, const Slot& s) const {
  if (!s.used()) return Mat(nullptr, s.dtype, s.rows, s.cols, s.ld);
  return view(arena, s);
}

}  // namespace tinyllama
