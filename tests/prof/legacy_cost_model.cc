// The cost model as it was written by hand before the op sequence was
// recorded (prof/cost_model.cc until 2026-11-28): kept here only to show the
// recorded sequence agrees with it, op for op (cost_model_agreement_test.cc).
#include <initializer_list>
#include <utility>
#include <vector>

#include "cuda/cross_entropy_rows.h"
#include "model/grad_layout.h"
#include "model/param_layout.h"
#include "prof/legacy_cost_model.h"

namespace tinyllama::prof::legacy {
namespace {

OpCost elementwise_op(const char* phase, const char* op, std::int64_t flops, std::int64_t bytes) {
  OpCost c;
  c.phase = phase;
  c.op = op;
  c.path = std::string(phase) + "/" + op;
  c.kind = OpKind::Elementwise;
  c.flops = flops;
  c.bytes = bytes;
  return c;
}

void add_update_recipe_cost(StepCost& sc, const ModelConfig& cfg, const StepPlan& plan) {
  const UpdateRecipe& u = plan.update;
  if (!u.accumulates() && !u.needs_norm()) return;
  const ParamLayout layout(cfg, plan.parallel.span_align());
  const auto m = static_cast<std::int64_t>(dtype_size(plan.precision.master));
  const std::int64_t n = GradLayout(layout, plan.ops.grad_buffers).total();
  const std::int64_t k = u.accumulation;
  std::vector<OpCost> ops;
  for (OpCost c : sc.ops) {
    if (c.phase == "optimizer" && (ops.empty() || ops.back().phase != "optimizer")) {
      if (u.accumulates()) {
        ops.push_back(
            elementwise_op("backward", "grad_accumulate", n * (k - 1), n * m * (2 + 3 * (k - 1))));
      }
      if (u.needs_norm()) ops.push_back(elementwise_op("optimizer", "grad_norm", 2 * n, n * m));
    }
    if (c.phase != "optimizer" && c.op != "overflow_check") {
      c.flops *= k;
      c.bytes *= k;
    }
    ops.push_back(std::move(c));
  }
  sc.ops = std::move(ops);
  sc.tokens *= k;
}

}  // namespace

namespace {

using i64 = std::int64_t;

constexpr i64 kTokenBytes = 4;  // int32 token ids and targets
constexpr i64 kF32Bytes = 4;

// Nominal FLOPs per element of the non-matmul ops: enough to place them on
// the roofline (they are all far left of the ridge), never counted as model
// work. RMSNorm forward: square, accumulate, scale by rstd, scale by w.
constexpr i64 kRmsNormForwardFlops = 4;
constexpr i64 kRmsNormBackwardFlops = 8;
constexpr i64 kRopeFlops = 3;            // 4 multiplies + 2 adds per rotated pair
constexpr i64 kRopeTableEntryBytes = 8;  // RopeImpl::Fused's (cos, sin) fp32 pair
constexpr i64 kSwigluForwardFlops = 5;
constexpr i64 kSwigluBackwardFlops = 10;
constexpr i64 kCrossEntropyFlops = 4;  // max, subtract, exp, sum per logit
constexpr i64 kAdamWFlops = 12;

struct Cost {
  i64 flops = 0;
  i64 bytes = 0;
  int gemms = 0;
  Cost& operator+=(const Cost& o) {
    flops += o.flops;
    bytes += o.bytes;
    gemms += o.gemms;
    return *this;
  }
};

// Element sizes of the run: activations and the weight copy the GEMMs read
// (compute), weight gradients and optimizer state (master), statistics.
struct Sizes {
  i64 c, m, st;
};

// y[T, out] = x[T, in] · W[out, in]ᵀ and its two gradients. dgrad may
// accumulate into its output (beta = 1), which reads the output too; its
// output elements are `dx` bytes wide.
Cost gemm_forward(const Sizes& s, i64 t, i64 in, i64 out) {
  return {2 * t * in * out, (t * in + out * in + t * out) * s.c, 1};
}
Cost gemm_dgrad(const Sizes& s, i64 t, i64 in, i64 out, bool accumulate, i64 dx) {
  return {2 * t * in * out,
          (t * out + out * in) * s.c + t * in * dx + (accumulate ? t * in * dx : 0), 1};
}
Cost gemm_wgrad(const Sizes& s, i64 t, i64 in, i64 out) {
  return {2 * t * in * out, (t * out + t * in) * s.c + out * in * s.m, 1};
}

// A linear layer whose output columns are `parts` (one part when fused):
// unfused levels run one GEMM per part on row slices of the fused weight.
Cost linear_forward(const Sizes& s, i64 t, i64 in, std::initializer_list<i64> parts) {
  Cost c;
  for (i64 out : parts) c += gemm_forward(s, t, in, out);
  return c;
}
// Several parts under AMP sum in an fp32 buffer, then one conversion
// writes the compute dtype (Model::separate_dgrad).
Cost linear_dgrad(const Sizes& s, i64 t, i64 in, std::initializer_list<i64> parts) {
  const bool fp32_sum = parts.size() > 1 && s.c < kF32Bytes;
  Cost c;
  bool first = true;
  for (i64 out : parts) {
    c += gemm_dgrad(s, t, in, out, !first, fp32_sum ? kF32Bytes : s.c);
    first = false;
  }
  if (fp32_sum) c += {0, t * in * (kF32Bytes + s.c), 0};
  return c;
}
Cost linear_wgrad(const Sizes& s, i64 t, i64 in, std::initializer_list<i64> parts) {
  Cost c;
  for (i64 out : parts) c += gemm_wgrad(s, t, in, out);
  return c;
}

Cost rmsnorm_forward(const Sizes& s, i64 t, i64 d) {
  return {kRmsNormForwardFlops * t * d, (2 * t * d + d) * s.c + t * s.st};
}
// ActivationsImpl::RecomputeNorms: reads x, w, rstd; writes the norm (two
// multiplies an element).
Cost rmsnorm_apply(const Sizes& s, i64 t, i64 d) {
  return {2 * t * d, (2 * t * d + d) * s.c + t * s.st};
}
Cost rmsnorm_backward(const Sizes& s, i64 t, i64 d) {
  // reads dout, x, w, rstd; writes dx and the weight gradient.
  return {kRmsNormBackwardFlops * t * d, (3 * t * d + d) * s.c + t * s.st + d * s.m};
}
Cost add(const Sizes& s, i64 t, i64 d) {
  return {t * d, 3 * t * d * s.c};
}
// GemmEpilogue::Residual: the projection also reads the residual it adds to.
Cost linear_forward_add(const Sizes& s, i64 t, i64 in, i64 out) {
  Cost c = gemm_forward(s, t, in, out);
  c += {0, t * out * s.c, 0};
  return c;
}
// NormImpl::Fused: reads a, b, w; writes the sum, the norm and rstd.
Cost add_rmsnorm_forward(const Sizes& s, i64 t, i64 d) {
  return {(kRmsNormForwardFlops + 1) * t * d, (4 * t * d + d) * s.c + t * s.st};
}
// Reads dout, x, w, rstd and the residual gradient; writes dx and dweight.
Cost rmsnorm_backward_add(const Sizes& s, i64 t, i64 d) {
  return {(kRmsNormBackwardFlops + 1) * t * d, (4 * t * d + d) * s.c + t * s.st + d * s.m};
}

class Builder {
 public:
  explicit Builder(StepCost& out) : out_(out) {}
  void phase(std::string p) {
    phase_ = std::move(p);
    layer_ = -1;
  }
  void layer(int l) { layer_ = l; }
  void add(const char* op, OpKind kind, const Cost& c) {
    OpCost o;
    o.phase = phase_;
    o.layer = layer_;
    o.op = op;
    o.path = phase_ + "/" + (layer_ >= 0 ? "layer" + std::to_string(layer_) + "/" : "") + op;
    o.kind = kind;
    o.flops = c.flops;
    o.bytes = c.bytes;
    o.gemm_calls = c.gemms;
    out_.ops.push_back(std::move(o));
  }

 private:
  StepCost& out_;
  std::string phase_;
  int layer_ = -1;
};

}  // namespace

namespace {

// One batch's forward, backward and optimizer (step_cost without the
// update recipe's additions).
StepCost one_batch_cost(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) {
  const Precision precision = plan.precision;
  const bool materialized = plan.ops.attention == AttentionImpl::Materialized;
  StepCost sc;
  const i64 t = shape.tokens();
  sc.tokens = t;
  const Sizes s{static_cast<i64>(dtype_size(precision.compute)),
                static_cast<i64>(dtype_size(precision.master)),
                static_cast<i64>(dtype_size(precision.stats()))};
  const i64 d = cfg.hidden_dim;
  const i64 f = cfg.ffn_dim;
  const i64 v = cfg.vocab_size;
  const i64 qd = cfg.q_dim();
  const i64 kvd = cfg.kv_dim();
  const i64 rope_cols = qd + kvd;  // q and k heads rotate, v does not
  const i64 bh = static_cast<i64>(shape.batch) * cfg.num_heads;
  const i64 seq = shape.seq;
  const i64 lse_bytes = bh * seq * s.st;
  const i64 probs_bytes = materialized ? bh * seq * seq * s.c : 0;
  // Causal half: 2·B·H·S²·hd forward (QKᵀ and PV), twice that backward.
  const i64 attn_fwd_flops = 2 * bh * seq * seq * cfg.head_dim();

  const bool fused_qkv = plan.ops.qkv_gemm == GemmGrouping::Fused;
  const bool fused_gate_up = plan.ops.gate_up_gemm == GemmGrouping::Fused;
  const bool fused_swiglu = plan.ops.swiglu != SwigluImpl::Separate;
  // SwigluImpl::Gemm: the SwiGLU's work is inside the GEMMs beside it.
  const bool swiglu_in_gemm = plan.ops.swiglu == SwigluImpl::Gemm;
  const bool fused_norm = plan.ops.norm == NormImpl::Fused;
  const bool adds_in_gemms = plan.ops.epilogue == GemmEpilogue::Residual;
  const bool fused_rope = plan.ops.rope == RopeImpl::Fused;
  Builder b(sc);
  b.phase("forward");
  b.add("embedding", OpKind::Elementwise, {0, t * kTokenBytes + 2 * t * d * s.c});
  for (int l = 0; l < cfg.num_layers; ++l) {
    b.layer(l);
    // Fused: the block above's ffn_residual_norm normalised this block's input.
    if (!fused_norm || l == 0 || adds_in_gemms) {
      b.add("attn_norm", OpKind::Elementwise, rmsnorm_forward(s, t, d));
    }
    b.add("qkv_gemm", OpKind::Gemm,
          fused_qkv ? linear_forward(s, t, d, {qd + 2 * kvd})
                    : linear_forward(s, t, d, {qd, kvd, kvd}));
    b.add("rope", OpKind::Elementwise, {kRopeFlops * t * rope_cols, 2 * t * rope_cols * s.c});
    b.add("attention", OpKind::Attention,
          {attn_fwd_flops, (2 * t * qd + 2 * t * kvd) * s.c + lse_bytes + probs_bytes});
    if (adds_in_gemms) {
      b.add("out_proj_gemm", OpKind::Gemm, linear_forward_add(s, t, qd, d));
      b.add("ffn_norm", OpKind::Elementwise, rmsnorm_forward(s, t, d));
    } else if (fused_norm) {
      b.add("out_proj_gemm", OpKind::Gemm, linear_forward(s, t, qd, {d}));
      b.add("attn_residual_norm", OpKind::Elementwise, add_rmsnorm_forward(s, t, d));
    } else {
      b.add("out_proj_gemm", OpKind::Gemm, linear_forward(s, t, qd, {d}));
      b.add("attn_residual", OpKind::Elementwise, add(s, t, d));
      b.add("ffn_norm", OpKind::Elementwise, rmsnorm_forward(s, t, d));
    }
    if (swiglu_in_gemm) {
      // The epilogue also writes h, from the g and u it holds. Its few
      // flops are left out: a GEMM op's flops are model work (MFU).
      Cost gemm = linear_forward(s, t, d, {2 * f});
      gemm.bytes += t * f * s.c;
      b.add("gate_up_gemm", OpKind::Gemm, gemm);
    } else {
      b.add("gate_up_gemm", OpKind::Gemm,
            fused_gate_up ? linear_forward(s, t, d, {2 * f}) : linear_forward(s, t, d, {f, f}));
      // Fused: silu(g)·u reads g, u and writes h; unfused writes and rereads silu(g).
      b.add("swiglu", OpKind::Elementwise,
            {kSwigluForwardFlops * t * f, (fused_swiglu ? 3 : 5) * t * f * s.c});
    }
    if (adds_in_gemms) {
      b.add("down_gemm", OpKind::Gemm, linear_forward_add(s, t, f, d));
    } else if (fused_norm) {
      b.add("down_gemm", OpKind::Gemm, linear_forward(s, t, f, {d}));
      // With the next block's attention norm, or the final norm.
      b.add("ffn_residual_norm", OpKind::Elementwise, add_rmsnorm_forward(s, t, d));
    } else {
      b.add("down_gemm", OpKind::Gemm, linear_forward(s, t, f, {d}));
      b.add("ffn_residual", OpKind::Elementwise, add(s, t, d));
    }
  }
  b.layer(-1);
  if (!fused_norm || adds_in_gemms) {
    b.add("final_norm", OpKind::Elementwise, rmsnorm_forward(s, t, d));
  }
  // Model work over the vocabulary: the GEMMs also run over the zero rows
  // up to ModelConfig::padded_vocab() (0.1 % more at GPT-2's 50257), which
  // MFU and 6NT do not count.
  const bool chunked_loss = plan.ops.loss == LossImpl::Chunked;
  if (chunked_loss) {
    // Per chunk: the head GEMM (rereading E), one kernel for the loss and
    // dlogits (two reads and a write of the chunk's logits; one read where
    // the kernel stages rows in shared memory), and the head's
    // gradients, the weight gradient rereading and rewriting its fp32
    // accumulator after the first chunk.
    const i64 chunks = (t + plan.loss_chunk_rows - 1) / plan.loss_chunk_rows;
    Cost head = linear_forward(s, t, d, {v});
    head.bytes += (chunks - 1) * v * d * s.c;
    b.add("lm_head_gemm", OpKind::Gemm, head);
    const i64 logit_passes = cuda::cross_entropy_row_staged_on_hopper(v * s.c) ? 2 : 3;
    b.add(
        "cross_entropy", OpKind::Elementwise,
        {2 * kCrossEntropyFlops * t * v, logit_passes * t * v * s.c + t * kTokenBytes + t * s.st});
    Cost wgrad = linear_wgrad(s, t, d, {v});
    wgrad.bytes += (chunks - 1) * 2 * v * d * s.m;
    b.add("lm_head_gemm_wgrad", OpKind::Gemm, wgrad);
    Cost dgrad = linear_dgrad(s, t, d, {v});
    dgrad.bytes += (chunks - 1) * v * d * s.c;
    b.add("lm_head_gemm_dgrad", OpKind::Gemm, dgrad);
  } else {
    b.add("lm_head_gemm", OpKind::Gemm, linear_forward(s, t, d, {v}));
    b.add("cross_entropy", OpKind::Elementwise,
          {kCrossEntropyFlops * t * v, t * v * s.c + t * kTokenBytes + t * s.st});
  }

  // One fused AdamW sweep over a span of the flat state (padding included):
  // reads param, grad, m, v; writes param, m, v and, under AMP, the compute
  // copy from the updated value it already holds (no refresh_weights op).
  const ParamLayout layout(cfg);
  auto fused_sweep = [&](ParamSpan span) -> Cost {
    i64 params = 0;
    for (const ParamSlot& slot : layout.slots()) {
      if (slot.offset >= span.begin && slot.offset < span.end) params += slot.numel();
    }
    return {kAdamWFlops * params,
            7 * span.size() * s.m + (precision.mixed() ? span.size() * s.c : 0), 0};
  };
  const bool layer_updates = plan.updates_layers_in_backward();
  const bool recompute_norms = recomputes_norms(plan.ops.activations);
  const bool recompute_swiglu = recomputes_swiglu(plan.ops.activations);

  b.phase("backward");
  if (!chunked_loss) {  // else the forward pass ran the head's backward
    b.add("cross_entropy", OpKind::Elementwise,
          {kCrossEntropyFlops * t * v, 2 * t * v * s.c + t * kTokenBytes});
    b.add("lm_head_gemm_dgrad", OpKind::Gemm, linear_dgrad(s, t, d, {v}));
    b.add("lm_head_gemm_wgrad", OpKind::Gemm, linear_wgrad(s, t, d, {v}));
  }
  b.add("final_norm", OpKind::Elementwise, rmsnorm_backward(s, t, d));
  for (int l = cfg.num_layers - 1; l >= 0; --l) {
    b.layer(l);
    if (recompute_swiglu) {
      // ActivationsImpl::RecomputeNormsSwiglu: h remade from g and u (fused:
      // the forward's silu·mul) or from the kept silu(g) and u (unfused: its
      // mul, one multiply an element); either reads two [t, F] and writes h.
      b.add("swiglu_recompute", OpKind::Elementwise,
            {(fused_swiglu ? kSwigluForwardFlops : 1) * t * f, 3 * t * f * s.c});
    }
    if (swiglu_in_gemm) {
      // The epilogue reads g and u and writes dg and du instead of writing dh
      // (its flops left out, as in the forward).
      Cost dgrad = linear_dgrad(s, t, f, {d});
      dgrad.bytes += 3 * t * f * s.c;
      b.add("down_gemm_dgrad", OpKind::Gemm, dgrad);
      b.add("down_gemm_wgrad", OpKind::Gemm, linear_wgrad(s, t, f, {d}));
    } else {
      b.add("down_gemm_dgrad", OpKind::Gemm, linear_dgrad(s, t, f, {d}));
      b.add("down_gemm_wgrad", OpKind::Gemm, linear_wgrad(s, t, f, {d}));
      // Fused: reads dh, g, u, writes dg, du. Unfused: three ops of three
      // tensors each (du = dh·s, ds = dh·u, dg = silu'(g)·ds).
      b.add("swiglu", OpKind::Elementwise,
            {kSwigluBackwardFlops * t * f, (fused_swiglu ? 5 : 9) * t * f * s.c});
    }
    if (recompute_norms) b.add("ffn_norm_recompute", OpKind::Elementwise, rmsnorm_apply(s, t, d));
    b.add("gate_up_gemm_dgrad", OpKind::Gemm,
          fused_gate_up ? linear_dgrad(s, t, d, {2 * f}) : linear_dgrad(s, t, d, {f, f}));
    b.add("gate_up_gemm_wgrad", OpKind::Gemm,
          fused_gate_up ? linear_wgrad(s, t, d, {2 * f}) : linear_wgrad(s, t, d, {f, f}));
    if (fused_norm) {
      b.add("ffn_residual_norm", OpKind::Elementwise, rmsnorm_backward_add(s, t, d));
    } else {
      b.add("ffn_norm", OpKind::Elementwise, rmsnorm_backward(s, t, d));
      b.add("ffn_residual", OpKind::Elementwise, add(s, t, d));
    }
    b.add("out_proj_gemm_dgrad", OpKind::Gemm, linear_dgrad(s, t, qd, {d}));
    b.add("out_proj_gemm_wgrad", OpKind::Gemm, linear_wgrad(s, t, qd, {d}));
    // Reads dout, q, k, v, lse and (flash) out or (materialised) the saved
    // probabilities; writes dq, dk, dv. Flash's D = rowsum(dout · out) is
    // scratch (the dQ kernel sums it from dout and out, which are counted
    // here once, and dK/dV rereads it), so it adds no bytes, whichever
    // kernel computes it (FlashDelta).
    const i64 attn_bwd_reads =
        materialized ? (2 * t * qd + 2 * t * kvd) * s.c : (3 * t * qd + 2 * t * kvd) * s.c;
    const Cost attn_bwd{2 * attn_fwd_flops,
                        attn_bwd_reads + lse_bytes + probs_bytes + (t * qd + 2 * t * kvd) * s.c};
    if (fused_rope) {
      // The rotation on the accumulators before the store: no pass over
      // dq|dk, only the (cos, sin) table read once (fp32 pairs per
      // (position, pair)). Its few nominal flops are left out: attention's
      // flops are model work (MFU), the products only.
      b.add("attention", OpKind::Attention,
            {attn_bwd.flops, attn_bwd.bytes + seq * cfg.head_dim() * kRopeTableEntryBytes / 2});
    } else {
      b.add("attention", OpKind::Attention, attn_bwd);
      b.add("rope", OpKind::Elementwise, {kRopeFlops * t * rope_cols, 2 * t * rope_cols * s.c});
    }
    if (recompute_norms) b.add("attn_norm_recompute", OpKind::Elementwise, rmsnorm_apply(s, t, d));
    b.add(
        "qkv_gemm_dgrad", OpKind::Gemm,
        fused_qkv ? linear_dgrad(s, t, d, {qd + 2 * kvd}) : linear_dgrad(s, t, d, {qd, kvd, kvd}));
    b.add(
        "qkv_gemm_wgrad", OpKind::Gemm,
        fused_qkv ? linear_wgrad(s, t, d, {qd + 2 * kvd}) : linear_wgrad(s, t, d, {qd, kvd, kvd}));
    if (fused_norm) {
      b.add("attn_residual_norm", OpKind::Elementwise, rmsnorm_backward_add(s, t, d));
    } else {
      b.add("attn_norm", OpKind::Elementwise, rmsnorm_backward(s, t, d));
      b.add("attn_residual", OpKind::Elementwise, add(s, t, d));
    }
    if (layer_updates) b.add("adamw", OpKind::Optimizer, fused_sweep(layout.layer_span(l)));
  }
  b.layer(-1);
  // Scatter-add into the embedding gradient: each looked-up row read and written.
  b.add("embedding", OpKind::Elementwise, {t * d, t * kTokenBytes + t * d * s.c + 2 * t * d * s.m});

  i64 params = 0;
  for (const ParamSlot& slot : layout.slots()) params += slot.numel();
  if (plan.loss_scaling == LossScaling::Dynamic) {
    // fp16 loss scaling scans the whole gradient block (padding included).
    b.add("overflow_check", OpKind::Elementwise, {layout.total(), layout.total() * s.m + 4});
  }

  b.phase("optimizer");
  if (plan.ops.optimizer != OptimizerImpl::PerTensor) {
    // The whole flat block in one sweep, or what the layers' sweeps in the
    // backward pass left: the embedding and the final norm.
    Cost sweep;
    if (layer_updates) {
      for (const ParamSpan& span : layout.non_layer_spans()) sweep += fused_sweep(span);
    } else {
      sweep = fused_sweep({0, layout.total()});
    }
    b.add("adamw", OpKind::Optimizer, sweep);
    return sc;
  }
  // Reads param, grad, m, v; writes param, m, v.
  b.add("adamw", OpKind::Optimizer, {kAdamWFlops * params, 7 * params * s.m});
  if (precision.mixed()) {
    b.add("refresh_weights", OpKind::Elementwise, {0, layout.total() * (s.m + s.c)});
  }
  return sc;
}

}  // namespace

StepCost hand_step_cost(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) {
  StepCost sc = one_batch_cost(cfg, shape, plan);
  add_update_recipe_cost(sc, cfg, plan);
  return sc;
}

}  // namespace tinyllama::prof::legacy
