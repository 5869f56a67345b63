#include "model/activation_plan.h"

#include <algorithm>
#include <utility>

namespace tinyllama {

// 256-byte alignment for every buffer: what cuBLASLt and 16-byte vector
// loads want, with room to spare.
constexpr std::int64_t kAlignBytes = 256;

ActivationPlan::ActivationPlan(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) {
  const Precision precision = plan.precision;
  const bool materialized = plan.ops.attention == AttentionImpl::Materialized;
  const bool separate_swiglu = plan.ops.swiglu == SwigluImpl::Separate;
  const std::int64_t n = shape.tokens();
  const std::int64_t d = cfg.hidden_dim;
  const std::int64_t f = cfg.ffn_dim;
  const DType act = precision.compute;
  const DType st = precision.stats();
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
    a.ffn_hidden = hidden_shared ? shared_hidden : take(n, f, act);
    layers.push_back(a);
  }
  residual_out = take(n, d, act);
  final_norm = take(n, d, act);
  final_rstd = take(n, 1, st);
  // Chunked: one chunk's rows, reused by every chunk.
  const std::int64_t logit_rows = plan.ops.loss == LossImpl::Chunked ? plan.loss_chunk_rows : n;
  logits = take(logit_rows, cfg.vocab_size, act, cfg.padded_vocab());
  losses = take(n, 1, st);

  d_residual_a = take(n, d, act);
  d_residual_b = take(n, d, act);
  d_norm_out = take(n, d, act);
  if (plan.ops.norm == NormImpl::Plain) d_norm_in = take(n, d, act);
  d_qkv = take(n, cfg.qkv_dim(), act);
  d_attn = take(n, cfg.q_dim(), act);
  d_gate_up = take(n, 2 * f, act);
  d_ffn_hidden = take(n, f, act);
  if (separate_swiglu) d_silu_gate = take(n, f, act);
  const bool separate_gemms = plan.ops.qkv_gemm == GemmGrouping::Separate ||
                              plan.ops.gate_up_gemm == GemmGrouping::Separate;
  if (separate_gemms && precision.mixed()) d_norm_sum = take(n, d, DType::F32);
}

Slot ActivationPlan::take(std::int64_t rows, std::int64_t cols, DType dtype, std::int64_t ld) {
  const auto es = static_cast<std::int64_t>(dtype_size(dtype));
  ld = std::max(ld, cols);
  Slot s{bytes, rows, cols, dtype, ld};
  const std::int64_t size = rows * ld * es;
  bytes += (size + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  return s;
}

namespace {

std::int64_t reserved_bytes(const Slot& s) {
  const std::int64_t size = s.rows * s.ld * static_cast<std::int64_t>(dtype_size(s.dtype));
  return (size + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
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
  const std::pair<const char*, const Slot*> scratch[] = {{"d_residual_a", &d_residual_a},
                                                         {"d_residual_b", &d_residual_b},
                                                         {"d_norm_out", &d_norm_out},
                                                         {"d_norm_in", &d_norm_in},
                                                         {"d_qkv", &d_qkv},
                                                         {"d_attn", &d_attn},
                                                         {"d_gate_up", &d_gate_up},
                                                         {"d_ffn_hidden", &d_ffn_hidden},
                                                         {"d_silu_gate", &d_silu_gate},
                                                         {"d_norm_sum", &d_norm_sum}};
  for (const auto& [name, slot] : scratch) add(name, "backward_scratch", *slot);
  std::sort(out.begin(), out.end(), [](const ActivationBuffer& a, const ActivationBuffer& b) {
    return a.slot.offset < b.slot.offset;
  });
  return out;
}

Mat ActivationPlan::view(void* arena, const Slot& s) const {
  if (!s.used()) return Mat();
  return Mat(static_cast<char*>(arena) + s.offset, s.dtype, s.rows, s.cols, s.ld);
}

}  // namespace tinyllama
