#include "model/activation_plan.h"

#include <algorithm>

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

  for (int l = 0; l < cfg.num_layers; ++l) {
    LayerActivations a;
    a.residual_in = take(n, d, act);
    a.norm1 = take(n, d, act);
    a.rstd1 = take(n, 1, st);
    a.qkv = take(n, cfg.qkv_dim(), act);
    a.attn_out = take(n, cfg.q_dim(), act);
    a.lse = take(bh, shape.seq, st);
    if (materialized) a.probs = take(bh * shape.seq, shape.seq, act);
    a.residual_mid = take(n, d, act);
    a.norm2 = take(n, d, act);
    a.rstd2 = take(n, 1, st);
    a.gate_up = take(n, 2 * f, act);
    if (separate_swiglu) a.silu_gate = take(n, f, act);
    a.ffn_hidden = take(n, f, act);
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

Mat ActivationPlan::view(void* arena, const Slot& s) const {
  if (!s.used()) return Mat();
  return Mat(static_cast<char*>(arena) + s.offset, s.dtype, s.rows, s.cols, s.ld);
}

}  // namespace tinyllama
