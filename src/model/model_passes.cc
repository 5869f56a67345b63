// The hand-written forward pass (DESIGN §1); the backward and optimizer
// passes are in model_backward.cc. The plan's choices pick between running
// one fused op or composing primitives on slices of the same buffers, so
// every level trains the same parameters.
#include "model/model.h"

#include <string>

#include "core/errors.h"
#include "core/op_marker.h"

namespace tinyllama {
namespace {

// The backend's exercise ops for the injected fault `fault` (model/faults.h);
// RuntimeFailure naming the kernel it `lacks` where it has none.
ExerciseOps& exercise_ops_for(Backend& backend, const char* fault, const char* lacks) {
  ExerciseOps* ops = backend.exercise_ops();
  if (ops == nullptr) {
    throw RuntimeFailure(std::string("--inject ") + fault + ": the " + backend.name() +
                         " backend has no " + lacks);
  }
  return *ops;
}

}  // namespace

void Model::forward() {
  begin_fp8_pass(/*records=*/true);
  run_forward(/*training=*/false);
  reduce_fp8_amaxes();
  if (comm_ != nullptr) reduce_losses(/*beside_backward=*/false);
}

void Model::evaluate() {
  begin_fp8_pass(/*records=*/false);
  run_forward(/*training=*/false);
  if (comm_ != nullptr) reduce_losses(/*beside_backward=*/false);
}

void Model::forward_pass() {
  begin_fp8_pass(/*records=*/true);
  run_forward(/*training=*/true);
  // An accumulating step sums the ranks' losses once, after its last
  // micro-batch: no collective before then.
  if (comm_ != nullptr && micro_ + 1 == micro_batches()) reduce_losses(/*beside_backward=*/true);
}

void Model::run_forward(bool training) {
  // Op markers (core/op_marker.h): NVTX ranges, and host ranges for --profile,
  // named like the cost model's ops (prof/cost_model.h).
  const OpScope phase("forward");
  OpSequence ops;
  const Mat x0 = acts_.view(arena_, acts_.layers[0].residual_in);
  ops.next("embedding");
  backend_.embedding_forward(x0, tokens_, compute_weight(layout_.embedding()));
  ops.close();
  for (int l = 0; l < cfg_.num_layers; ++l) forward_layer(l);

  const Mat xl = acts_.view(arena_, acts_.residual_out);
  const Mat nf = acts_.view(arena_, acts_.final_norm);
  if (!fused_norm() || adds_in_gemms()) {  // else the last block's residual_norm wrote nf
    ops.next("final_norm");
    backend_.rmsnorm_forward(nf, acts_.view(arena_, acts_.final_rstd), xl,
                             compute_weight(layout_.final_norm()), cfg_.rms_eps);
  }
  ops.close();
  loss_forward(training);
}

void Model::forward_layer(int l) {
  const OpScope layer(layer_label(l));
  OpSequence ops;
  const Fp8Made gate_up_made = forward_attention_block(l, ops);
  forward_ffn_block(l, ops, gate_up_made);
}

// h = x + Wo(attn(rope(q), rope(k), v)) with q, k, v from norm1(x), and h's
// norm for the feed-forward half.
Fp8Made Model::forward_attention_block(int l, OpSequence& ops) {
  const LayerActivations& a = acts_.layers[l];
  const Mat x = acts_.view(arena_, a.residual_in);
  const Mat n1 = acts_.view(arena_, a.norm1);
  const Mat qkv = acts_.view(arena_, a.qkv);
  const Mat attn = acts_.view(arena_, a.attn_out);
  const Mat h = acts_.view(arena_, a.residual_mid);
  const int qd = cfg_.q_dim();
  const int kvd = cfg_.kv_dim();

  // Else the block above's residual_norm wrote n1 (unless the add went into
  // its down-projection GEMM, and the norm with it into this block).
  Fp8Made qkv_made;
  if (!fused_norm() || l == 0 || adds_in_gemms()) {
    ops.next("attn_norm");
    qkv_made = norm_forward(LinearKind::Qkv, l, n1, acts_.view(arena_, a.rstd1), x,
                            compute_weight(layout_.layer(l, &LayerSlots::attn_norm)));
  }
  ops.next("qkv_gemm");
  qkv_forward(l, qkv_made);
  // q and k heads sit side by side in qkv, so one call rotates both.
  ops.next("rope");
  backend_.rope_forward(qkv.col_block(0, qd + kvd), shape_.seq, cfg_.head_dim(), cfg_.rope_theta);
  const AttentionShape as = attention_shape(cfg_, shape_);
  ops.next("attention");
  if (plan_.faults.noncontiguous_kv) {  // exercise fault: slow on purpose (model/faults.h)
    exercise_ops_for(backend_, "noncontiguous-kv", "strided attention kernel")
        .strided_kv_attention_forward(attn, acts_.view(arena_, a.lse), qkv.col_block(0, qd),
                                      qkv.col_block(qd, kvd), qkv.col_block(qd + kvd, kvd), as);
  } else {
    backend_.attention_forward(forward_attention(plan_.ops.attention), attn,
                               acts_.view(arena_, a.lse), acts_.view(arena_, a.probs),
                               qkv.col_block(0, qd), qkv.col_block(qd, kvd),
                               qkv.col_block(qd + kvd, kvd), as);
  }
  ops.next("out_proj_gemm");
  const Mat wo = compute_weight(layout_.layer(l, &LayerSlots::wo));
  const Mat n2 = acts_.view(arena_, a.norm2);
  const Mat ffn_norm = compute_weight(layout_.layer(l, &LayerSlots::ffn_norm));
  if (adds_in_gemms()) {  // h = x + Wo(attn), the sum rounded once
    linear_forward_add(LinearKind::OutProj, l, h, attn, wo, x);
    ops.next("ffn_norm");
    return norm_forward(LinearKind::GateUp, l, n2, acts_.view(arena_, a.rstd2), h, ffn_norm);
  }
  if (fused_norm()) {
    linear_forward(LinearKind::OutProj, l, h, attn, wo);
    ops.next("attn_residual_norm");
    backend_.add_rmsnorm_forward(h, n2, acts_.view(arena_, a.rstd2), h, x, ffn_norm, cfg_.rms_eps);
  } else {
    linear_forward(LinearKind::OutProj, l, h, attn, wo);
    ops.next("attn_residual");
    backend_.add(h, h, x);
    ops.next("ffn_norm");
    backend_.rmsnorm_forward(n2, acts_.view(arena_, a.rstd2), h, ffn_norm, cfg_.rms_eps);
  }
  return {};
}

// out = h + Wdown(silu(g) * u), and out's norm for the next block where
// the plan fuses it.
void Model::forward_ffn_block(int l, OpSequence& ops, Fp8Made gate_up_made) {
  const LayerActivations& a = acts_.layers[l];
  const Mat h = acts_.view(arena_, a.residual_mid);
  const Mat n2 = acts_.view(arena_, a.norm2);
  const Mat out = acts_.view(
      arena_, l + 1 < cfg_.num_layers ? acts_.layers[l + 1].residual_in : acts_.residual_out);
  const Mat gu = acts_.view(arena_, a.gate_up);
  // No memory where the plan keeps it as codes only (Fp8Linears::swiglu_keeps_codes).
  const Mat hidden = acts_.shaped(arena_, a.ffn_hidden);
  const int f = cfg_.ffn_dim;
  Fp8Made made;  // the down projection's FP8 input, if the SwiGLU wrote it
  ops.next("gate_up_gemm");
  if (plan_.ops.swiglu == SwigluImpl::Gemm && !plan_.faults.naive_swiglu) {
    // silu(g) * u in the GEMM's epilogue: no "swiglu" op.
    backend_.gemm_swiglu_forward(gu, hidden, n2,
                                 compute_weight(layout_.layer(l, &LayerSlots::wgu)));
  } else {
    ffn_up_forward(l, gate_up_made);
    const Mat gate = gu.col_block(0, f);
    const Mat up = gu.col_block(f, f);
    ops.next("swiglu");
    if (plan_.ops.swiglu == SwigluImpl::Separate) {
      const Mat s = acts_.view(arena_, a.silu_gate);
      backend_.silu_forward(s, gate);
      backend_.mul(hidden, s, up);
    } else {
      made = swiglu_forward_for_fp8(l, hidden, gate, up, /*recompute=*/false);
      if (!made.x) backend_.swiglu_forward(hidden, gate, up);
    }
  }
  ops.next("down_gemm");
  const Mat wdown = compute_weight(layout_.layer(l, &LayerSlots::wdown));
  if (adds_in_gemms()) {  // out = h + Wdown(hidden); the next block normalises it
    linear_forward_add(LinearKind::Down, l, out, hidden, wdown, h, made);
    return;
  }
  linear_forward(LinearKind::Down, l, out, hidden, wdown, made);
  if (!fused_norm()) {
    ops.next("ffn_residual");
    backend_.add(out, out, h);
    return;
  }
  // The next block's attention norm, or the final norm after the last block.
  const bool last = l + 1 == cfg_.num_layers;
  const Mat next_norm = acts_.view(arena_, last ? acts_.final_norm : acts_.layers[l + 1].norm1);
  const Mat next_rstd = acts_.view(arena_, last ? acts_.final_rstd : acts_.layers[l + 1].rstd1);
  const Mat next_weight =
      compute_weight(last ? layout_.final_norm() : layout_.layer(l + 1, &LayerSlots::attn_norm));
  ops.next("ffn_residual_norm");
  backend_.add_rmsnorm_forward(out, next_norm, next_rstd, out, h, next_weight, cfg_.rms_eps);
}

Model::RowParts Model::qkv_parts() const {
  const int qd = cfg_.q_dim();
  const int kvd = cfg_.kv_dim();
  return RowParts{3, {0, qd, qd + kvd}, {qd, kvd, kvd}};
}

Model::RowParts Model::gate_up_parts() const {
  const int f = cfg_.ffn_dim;
  return RowParts{2, {0, f}, {f, f}};
}

void Model::qkv_forward(int l, Fp8Made made) {
  const LayerActivations& a = acts_.layers[l];
  const Mat n1 = acts_.view(arena_, a.norm1);
  const Mat qkv = acts_.view(arena_, a.qkv);
  const Mat w = compute_weight(layout_.layer(l, &LayerSlots::wqkv));
  if (plan_.ops.qkv_gemm == GemmGrouping::Fused) {
    linear_forward(LinearKind::Qkv, l, qkv, n1, w, made);
    return;
  }
  // Three GEMMs on row slices of the fused weight, into column slices.
  const RowParts parts = qkv_parts();
  for (int i = 0; i < parts.count; ++i) {
    backend_.gemm(qkv.col_block(parts.starts[i], parts.widths[i]), n1, false,
                  w.row_block(parts.starts[i], parts.widths[i]), true, 1.0f, 0.0f);
  }
}

void Model::ffn_up_forward(int l, Fp8Made made) {
  const LayerActivations& a = acts_.layers[l];
  const Mat n2 = acts_.view(arena_, a.norm2);
  const Mat gu = acts_.view(arena_, a.gate_up);
  const Mat w = compute_weight(layout_.layer(l, &LayerSlots::wgu));
  if (plan_.faults.naive_swiglu) {  // exercise fault: slow on purpose (model/faults.h)
    exercise_ops_for(backend_, "naive-swiglu", "naive kernel").naive_linear(gu, n2, w);
    return;
  }
  if (plan_.ops.gate_up_gemm == GemmGrouping::Fused) {
    linear_forward(LinearKind::GateUp, l, gu, n2, w, made);
    return;
  }
  const RowParts parts = gate_up_parts();
  for (int i = 0; i < parts.count; ++i) {
    backend_.gemm(gu.col_block(parts.starts[i], parts.widths[i]), n2, false,
                  w.row_block(parts.starts[i], parts.widths[i]), true, 1.0f, 0.0f);
  }
}

}  // namespace tinyllama
