// The hand-written backward pass and the optimizer passes (DESIGN §1); the
// forward pass is in model_passes.cc. As there, the plan's choices pick
// fused ops or compositions of primitives on the same buffers.
#include "model/model.h"

#include <stdexcept>
#include <utility>

#include "core/op_marker.h"

namespace tinyllama {

void Model::backward(float loss_scale, bool check_overflow) {
  stage_step(loss_scale, check_overflow, hyper_);
  backward_pass();
}

void Model::backward_pass(bool update_layers) {
  const OpScope phase("backward");
  // A checked (fp16) step may still be skipped: its updates wait for the scan.
  layers_updated_ = update_layers && plan_.updates_layers_in_backward() && !check_overflow_;
  if (plan_.grad_ring() && !layers_updated_) {
    // The layers below would overwrite the gradient slots before anything
    // read them: only the per-layer sweeps consume a ring.
    throw std::logic_error(
        "Model::backward_pass: grad_buffers ring needs the layers updated in the backward pass "
        "(a whole step, backward_pass(true), unchecked)");
  }
  slot_sweeps_ = {-1, -1};
  OpSequence ops;
  const ParamSlot& emb = layout_.embedding();
  // The embedding gradient's work that needs only the tokens, beside the
  // backward pass rather than after it (Backend::embedding_backward_prepare).
  ops.next("embedding");
  backend_.embedding_backward_prepare(tokens_, shape_.tokens(), grad(emb).rows);
  ops.close();
  loss_backward();
  const Mat dnf = acts_.view(arena_, acts_.d_norm_out);
  const Mat d_out = acts_.view(arena_, acts_.d_residual_a);
  const Mat d_scratch = acts_.view(arena_, acts_.d_residual_b);
  ops.next("final_norm");
  backend_.rmsnorm_backward(
      d_out, grad(layout_.final_norm()), dnf, acts_.view(arena_, acts_.residual_out),
      compute_weight(layout_.final_norm()), acts_.view(arena_, acts_.final_rstd));
  ops.close();
  WgradTickets tickets;
  // The scratch over the logits is first written after the last layer's
  // down projection, where it joins tickets.gate_up: the head is done there.
  if (acts_.scratch_over_logits) tickets.gate_up = head_wgrad_ticket_;
  for (int l = cfg_.num_layers - 1; l >= 0; --l) backward_layer(l, d_out, d_scratch, tickets);
  backend_.join_side_gemms();  // every weight gradient is complete from here on
  reduce_fp8_amaxes();         // the pass's last FP8 cast is behind
  ops.next("embedding");
  backend_.embedding_backward(grad(emb), tokens_, d_out);
  ops.close();
  // An accumulating step exchanges and scans the sum of its micro-batches'
  // gradients (accumulate_gradients), not each one's.
  if (!plan_.update.accumulates()) finish_gradients(non_layer_spans_);
}

void Model::finish_gradients(const std::vector<ParamSpan>& buckets) {
  OpSequence ops;
  if (comm_ != nullptr) {
    ops.next("grad_exchange");
    for (const ParamSpan& bucket : buckets) exchange_gradients(bucket);
  }
  if (!check_overflow_) return;
  ops.next("overflow_check");
  if (comm_ != nullptr) {
    parallel_overflow_check();
    return;
  }
  backend_.fill_zero(overflow_flag_, sizeof(std::int32_t));
  backend_.flag_nonfinite(Mat(grads_, plan_.precision.master, 1, layout_.total()), overflow_flag_);
}

// On entry d_out holds d(loss)/d(block output); on return d(loss)/d(block input).
// The feed-forward half, out = h + Wdown(silu(g) * u): d_out in, d(h) into
// d_h. Returns the down projection's weight-gradient ticket, which the
// attention half's norm backward joins.
std::int64_t Model::backward_ffn_block(int l, Mat d_out, Mat d_h, WgradTickets& tickets,
                                       OpSequence& ops) {
  const LayerActivations& a = acts_.layers[l];
  const int f = cfg_.ffn_dim;
  const Mat d_norm_out = acts_.view(arena_, acts_.d_norm_out);
  const Mat hidden = acts_.shaped(arena_, a.ffn_hidden);
  const Mat d_hidden = acts_.view(arena_, acts_.d_ffn_hidden);
  const Mat gu = acts_.view(arena_, a.gate_up);
  const Mat gate = gu.col_block(0, f), up = gu.col_block(f, f);
  // hidden^T for the down weight gradient where the SwiGLU wrote it: kept, or recomputed below
  Fp8Made down_made{.x_t = plan_.fp8.swiglu_keeps_codes};
  if (recompute_swiglu()) {
    // The shared hidden's last reader, the layer above's down weight
    // gradient, was joined by that layer's attention norm backward (as
    // was that of the down projection's x^T buffer).
    // The forward's own op on the same inputs: the same bits.
    ops.next("swiglu_recompute");
    down_made = swiglu_forward_for_fp8(l, hidden, gate, up, /*recompute=*/true);
    const bool bf16_hidden = !down_made.x_t;  // else its codes are all the backward reads
    if (bf16_hidden && plan_.ops.swiglu != SwigluImpl::Separate) {  // as Gemm's epilogue does
      backend_.swiglu_forward(hidden, gate, up);
    } else if (bf16_hidden) {  // the forward's mul, of the silu(g) it kept and u
      backend_.mul(hidden, acts_.view(arena_, a.silu_gate), up);
    }
  }
  const ParamSlot& wdown = layout_.layer(l, &LayerSlots::wdown);
  const Mat d_gu = acts_.shaped(arena_, acts_.d_gate_up);
  const Mat d_gate = d_gu.col_block(0, f);
  const Mat d_up = d_gu.col_block(f, f);
  // The weight gradient reads d_out and hidden, which the input gradient
  // (d_hidden, d_gate_up) leaves alone: issued after it, from before it
  // (and after their FP8 copies, if any).
  ops.next("down_gemm_dgrad");
  const Fp8Grads q =
      fp8_backward_operands(LinearKind::Down, l, d_out, hidden, compute_weight(wdown), down_made);
  backend_.fork_side_gemms();
  auto down_wgrad = [&] {
    ops.next("down_gemm_wgrad");
    return linear_wgrad(LinearKind::Down, q, grad(wdown), d_out, hidden);
  };
  std::int64_t down_ticket = 0;
  Fp8Made gate_up_made;  // the FP8 copies the SwiGLU (dy) and the recomputed norm (x^T) wrote
  if (plan_.ops.swiglu == SwigluImpl::Gemm) {
    // The SwiGLU backward in this GEMM's epilogue: no "swiglu" op.
    backend_.join_side_gemm(tickets.gate_up);  // d_gate_up is overwritten next
    backend_.gemm_swiglu_backward(d_gu, d_hidden, d_out, compute_weight(wdown), gu);
    down_ticket = down_wgrad();
  } else {
    linear_dgrad(LinearKind::Down, q, d_hidden, d_out, compute_weight(wdown));
    down_ticket = down_wgrad();
    backend_.join_side_gemm(tickets.gate_up);  // d_gate_up is overwritten next
    ops.next("swiglu");
    if (plan_.ops.swiglu == SwigluImpl::Fused) {
      gate_up_made = swiglu_backward_for_fp8(l, d_gu, d_hidden, gate, up);
      if (!gate_up_made.dy) backend_.swiglu_backward(d_gate, d_up, d_hidden, gate, up);
    } else {
      const Mat s = acts_.view(arena_, a.silu_gate);
      const Mat d_s = acts_.view(arena_, acts_.d_silu_gate);
      backend_.mul(d_up, d_hidden, s);
      backend_.mul(d_s, d_hidden, up);
      backend_.silu_backward(d_gate, d_s, gate);
    }
  }
  if (recompute_norms()) {
    // The shared norm2's last reader, the layer above's gate/up weight
    // gradient, was joined before the SwiGLU backward.
    ops.next("ffn_norm_recompute");
    gate_up_made.x_t = recompute_norm(LinearKind::GateUp, l, acts_.view(arena_, a.norm2),
                                      acts_.view(arena_, a.residual_mid),
                                      compute_weight(layout_.layer(l, &LayerSlots::ffn_norm)),
                                      acts_.view(arena_, a.rstd2))
                           .x_t;
  }
  ops.close();  // ffn_up_backward marks its two GEMMs
  tickets.gate_up = ffn_up_backward(l, d_norm_out, gate_up_made);
  const ParamSlot& ffn_norm = layout_.layer(l, &LayerSlots::ffn_norm);
  norm_residual_backward(d_h, grad(ffn_norm), d_norm_out, acts_.view(arena_, a.residual_mid),
                         compute_weight(ffn_norm), acts_.view(arena_, a.rstd2), d_out,
                         tickets.out_proj, NormHalf::Ffn);
  return down_ticket;
}

// The attention half, h = x + Wo(attn(rope(q), rope(k), v)): d(h) in, d(x)
// into d_out.
void Model::backward_attention_block(int l, Mat d_out, Mat d_h, std::int64_t down_ticket,
                                     WgradTickets& tickets, OpSequence& ops) {
  const LayerActivations& a = acts_.layers[l];
  const int qd = cfg_.q_dim();
  const int kvd = cfg_.kv_dim();
  const Mat d_norm_out = acts_.view(arena_, acts_.d_norm_out);
  const Mat attn = acts_.view(arena_, a.attn_out);
  const Mat d_attn = acts_.view(arena_, acts_.d_attn);
  tickets.out_proj = projection_backward(LinearKind::OutProj, l, d_attn, attn, d_h,
                                         layout_.layer(l, &LayerSlots::wo), GemmGrouping::Fused,
                                         RowParts{}, "out_proj_gemm_wgrad", "out_proj_gemm_dgrad");

  const Mat qkv = acts_.view(arena_, a.qkv);
  const Mat d_qkv = acts_.view(arena_, acts_.d_qkv);
  const AttentionShape as = attention_shape(cfg_, shape_);
  backend_.join_side_gemm(tickets.qkv);  // d_qkv is overwritten next
  ops.next("attention");
  const Mat d_q = d_qkv.col_block(0, qd);
  const Mat d_k = d_qkv.col_block(qd, kvd);
  const Mat d_v = d_qkv.col_block(qd + kvd, kvd);
  const Mat lse = acts_.view(arena_, a.lse);
  const Mat probs = acts_.view(arena_, a.probs);
  if (plan_.ops.rope == RopeImpl::Fused) {
    // RoPE's backward rotation inside attention's: no "rope" op here.
    backend_.attention_rope_backward(backward_attention(plan_.ops.attention), d_q, d_k, d_v, d_attn,
                                     qkv.col_block(0, qd), qkv.col_block(qd, kvd),
                                     qkv.col_block(qd + kvd, kvd), attn, lse, probs, as,
                                     cfg_.rope_theta);
  } else {
    backend_.attention_backward(backward_attention(plan_.ops.attention), d_q, d_k, d_v, d_attn,
                                qkv.col_block(0, qd), qkv.col_block(qd, kvd),
                                qkv.col_block(qd + kvd, kvd), attn, lse, probs, as);
    ops.next("rope");
    backend_.rope_backward(d_qkv.col_block(0, qd + kvd), shape_.seq, cfg_.head_dim(),
                           cfg_.rope_theta);
  }
  Fp8Made qkv_made;  // the QKV input's transposed FP8 copy, if the recomputed norm wrote it
  if (recompute_norms()) {
    // The shared norm1's last reader, the layer above's QKV weight
    // gradient, was joined before the attention backward.
    ops.next("attn_norm_recompute");
    qkv_made = recompute_norm(
        LinearKind::Qkv, l, acts_.view(arena_, a.norm1), acts_.view(arena_, a.residual_in),
        compute_weight(layout_.layer(l, &LayerSlots::attn_norm)), acts_.view(arena_, a.rstd1));
  }
  ops.close();  // qkv_backward marks its two GEMMs
  tickets.qkv = qkv_backward(l, d_norm_out, qkv_made);
  const ParamSlot& attn_norm = layout_.layer(l, &LayerSlots::attn_norm);
  norm_residual_backward(d_out, grad(attn_norm), d_norm_out, acts_.view(arena_, a.residual_in),
                         compute_weight(attn_norm), acts_.view(arena_, a.rstd1), d_h, down_ticket,
                         NormHalf::Attn);
}

void Model::backward_layer(int l, Mat d_out, Mat d_scratch, WgradTickets& tickets) {
  const OpScope layer(layer_label(l));
  OpSequence ops;
  if (plan_.grad_ring()) {
    // This layer's gradient slot was last read by the sweep of the layer two
    // above: that sweep finishes before anything below writes the slot (an
    // edge of the captured graph from the sweep's branch to the main stream,
    // which the side GEMMs fork from).
    backend_.join_side_update(slot_sweeps_[grad_layout_.slot_of_layer(l)]);
  }

  // d_scratch holds d(h), the gradient at the block's middle residual.
  const std::int64_t down_ticket = backward_ffn_block(l, d_out, d_scratch, tickets, ops);
  backward_attention_block(l, d_out, d_scratch, down_ticket, tickets, ops);
  if (exchanges_in_backward()) {
    // Data parallel: this layer's gradients summed over the ranks while
    // the layers below are computed.
    ops.next("grad_exchange");
    exchange_gradients(layout_.layer_span(l));
  }
  if (layers_updated_) {
    // Every gradient of this layer is issued (the weight gradients on the
    // side branch, which the sweep waits for), and nothing below reads its
    // weights: update them beside the rest of the backward pass.
    ops.next("adamw");
    if (comm_ != nullptr) {
      update_bucket(layout_.layer_span(l), update_hyper());
    } else {
      const std::int64_t ticket =
          sweep_adamw(layout_.layer_span(l), update_hyper(), /*beside_backward=*/true);
      if (plan_.grad_ring()) slot_sweeps_[grad_layout_.slot_of_layer(l)] = ticket;
    }
  }
}

// d(residual) = d(residual above) + the norm's input gradient: one op
// (NormImpl::Fused) or the norm's backward then the add. `d_sum` is
// overwritten, so the side GEMM `reader` (which reads it) is joined first.
void Model::norm_residual_backward(Mat d_sum, Mat d_weight, Mat d_norm, Mat x, Mat weight, Mat rstd,
                                   Mat d_above, std::int64_t reader, NormHalf half) {
  OpSequence ops;  // marker names must be literals (core/op_marker.h)
  const bool ffn = half == NormHalf::Ffn;
  if (fused_norm()) {
    backend_.join_side_gemm(reader);
    ops.next(ffn ? "ffn_residual_norm" : "attn_residual_norm");
    backend_.rmsnorm_backward_add(d_sum, d_weight, d_norm, x, weight, rstd, d_above);
    return;
  }
  const Mat d_norm_in = acts_.view(arena_, acts_.d_norm_in);
  ops.next(ffn ? "ffn_norm" : "attn_norm");
  backend_.rmsnorm_backward(d_norm_in, d_weight, d_norm, x, weight, rstd);
  backend_.join_side_gemm(reader);
  ops.next(ffn ? "ffn_residual" : "attn_residual");
  backend_.add(d_sum, d_above, d_norm_in);
}

// d(norm1) = d(qkv) · Wqkv and d(Wqkv) = d(qkv)ᵀ · norm1, fused or per slice.
std::int64_t Model::qkv_backward(int l, Mat d_n1, Fp8Made made) {
  return projection_backward(LinearKind::Qkv, l, d_n1, acts_.view(arena_, acts_.layers[l].norm1),
                             acts_.view(arena_, acts_.d_qkv), layout_.layer(l, &LayerSlots::wqkv),
                             plan_.ops.qkv_gemm, qkv_parts(), "qkv_gemm_wgrad", "qkv_gemm_dgrad",
                             made);
}

// The norm's output again from its saved rstd (ActivationsImpl's
// recompute), or, where the linear it feeds has an FP8 weight gradient and
// the plan has the norm write the codes (Fp8Linears::norm_casts), only the
// transposed codes that GEMM reads: nothing else reads the recomputed
// output then. Returns what it made.
Fp8Made Model::recompute_norm(LinearKind kind, int l, Mat out, Mat x, Mat weight, Mat rstd) {
  Fp8Made made;
  if (!plan_.fp8.norm_casts || !plan_.fp8.at(kind, LinearPass::Wgrad)) {
    backend_.rmsnorm_apply(out, x, weight, rstd);
    return made;
  }
  const Fp8Tensor q = acts_.fp8.backward_input(arena_, kind, l, linear_shape(cfg_, shape_, kind));
  backend_.rmsnorm_apply_fp8(out, x, weight, rstd, q, fp8_input_scale(kind), /*keep_out=*/false);
  made.x_t = true;
  return made;
}

std::int64_t Model::ffn_up_backward(int l, Mat d_n2, Fp8Made made) {
  return projection_backward(LinearKind::GateUp, l, d_n2, acts_.view(arena_, acts_.layers[l].norm2),
                             acts_.shaped(arena_, acts_.d_gate_up),
                             layout_.layer(l, &LayerSlots::wgu), plan_.ops.gate_up_gemm,
                             gate_up_parts(), "gate_up_gemm_wgrad", "gate_up_gemm_dgrad", made);
}

std::int64_t Model::projection_backward(LinearKind kind, int l, Mat d_in, Mat in, Mat d_out,
                                        const ParamSlot& slot, GemmGrouping grouping,
                                        const RowParts& parts, const char* wgrad_op,
                                        const char* dgrad_op, Fp8Made made) {
  const Mat w = compute_weight(slot);
  const Mat dw = grad(slot);
  OpSequence ops;
  if (grouping == GemmGrouping::Fused) {
    // FP8 copies (the data gradient's op counts their casts), then the
    // input gradient first (the critical path), the weight gradient beside
    // it from before it: it reads d_out and in, which d_in is not.
    ops.next(dgrad_op);
    const Fp8Grads q = fp8_backward_operands(kind, l, d_out, in, w, made);
    backend_.fork_side_gemms();
    linear_dgrad(kind, q, d_in, d_out, w);
    ops.next(wgrad_op);
    return linear_wgrad(kind, q, dw, d_out, in);
  }
  backend_.fork_side_gemms();
  // Every dgrad slice, then every wgrad slice: the same results as
  // interleaving them (they touch different buffers), as two marked ops.
  ops.next(dgrad_op);
  separate_dgrad(d_in, d_out, w, parts);
  ops.next(wgrad_op);
  std::int64_t ticket = 0;
  for (int i = 0; i < parts.count; ++i) {
    ticket = backend_.side_gemm_from_fork(dw.row_block(parts.starts[i], parts.widths[i]),
                                          d_out.col_block(parts.starts[i], parts.widths[i]), true,
                                          in, false, 1.0f, 0.0f);
  }
  return ticket;
}

void Model::separate_dgrad(Mat d_in, Mat d_out, Mat w, const RowParts& parts) {
  const Mat sum = acts_.d_norm_sum.used() ? acts_.view(arena_, acts_.d_norm_sum) : d_in;
  for (int i = 0; i < parts.count; ++i) {
    backend_.gemm(sum, d_out.col_block(parts.starts[i], parts.widths[i]), false,
                  w.row_block(parts.starts[i], parts.widths[i]), false, 1.0f, i == 0 ? 0.0f : 1.0f);
  }
  if (sum.data != d_in.data) backend_.convert(d_in, sum);
}

void Model::accumulate_gradients() {
  if (!plan_.update.accumulates()) return;
  // In the backward phase, so that its ops (and the last micro-batch's
  // exchanges) are named as the cost model and the unaccumulated step name
  // them: backward/grad_accumulate, backward/grad_exchange.
  const OpScope phase("backward");
  const DType m = plan_.precision.master;
  const Mat grads(grads_, m, 1, grad_layout_.total());
  const Mat sum(grad_accum_, m, 1, grad_layout_.total());
  {
    const OpScope op("grad_accumulate");
    if (micro_ == 0) {
      backend_.convert(sum, grads);
    } else if (micro_ + 1 < micro_batches()) {
      backend_.add(sum, sum, grads);
    } else {
      // The last micro-batch: the step's gradient is the sum, added in the
      // order torch's .grad accumulation adds (((g1 + g2) + g3) + g4).
      backend_.add(grads, sum, grads);
    }
  }
  if (micro_ + 1 == micro_batches()) finish_gradients(layout_.spans());
}

void Model::compute_grad_norm() {
  const OpScope op("grad_norm");
  const DType m = plan_.precision.master;
  backend_.fill_zero(norm_acc_, sizeof(double));
  if (comm_ != nullptr && plan_.parallel.shard_optimizer) {
    // Each rank holds its shards of the summed gradient: partial sums of
    // squares, combined over the ranks (clip_by_norm's unscale divides
    // the ranks out with the loss scale).
    backend_.join_side_updates();  // the exchanges
    for_each_grad_shard([&](Mat shard) { backend_.sum_squares(shard, norm_acc_); });
    comm_->all_reduce(norm_acc_, 1, DType::F64, ReduceOp::Sum, backend_.main_stream_handle());
  } else {
    if (comm_ != nullptr) backend_.join_side_updates();  // the all-reduced gradient
    backend_.sum_squares(Mat(grads_, m, 1, grad_layout_.total()), norm_acc_);
  }
  backend_.clip_by_norm(norm_acc_, plan_.update.clip_norm, step_scalars_, grad_norm_);
}

void Model::optimizer_step(const AdamWHyper& hyper) {
  stage_step(loss_scale_, check_overflow_, hyper);
  optimizer_pass();
}

AdamWHyper Model::update_hyper() const {
  // lr, the step count's bias corrections and the loss scale to divide out
  // come from the staged scalars; the rest of hyper_ is fixed per run.
  AdamWHyper hp = hyper_;
  hp.scalars = step_scalars_;
  if (check_overflow_) hp.skip_flag = overflow_flag_;
  return hp;
}

std::int64_t Model::sweep_adamw(ParamSpan span, const AdamWHyper& hp, bool beside_backward) {
  // The moments are full-size here (a sharded optimizer sweeps its shards).
  return sweep_shard({span, span.begin}, hp, beside_backward);
}

void Model::optimizer_pass() {
  const OpScope phase("optimizer");
  const AdamWHyper hp = update_hyper();
  // Before any update that is not already done (clipping's plans update
  // nothing in the backward pass); a norm that is only reported reads the
  // gradients, which the per-layer sweeps left as they were.
  if (computes_grad_norm()) compute_grad_norm();
  if (comm_ != nullptr && plan_.ops.optimizer != OptimizerImpl::PerTensor) {
    const OpScope op("adamw");
    parallel_optimizer_pass(hp);
    return;
  }
  if (comm_ != nullptr) backend_.join_side_updates();  // the all-reduced gradients
  if (plan_.ops.optimizer != OptimizerImpl::PerTensor) {
    // Sweeps over the four equal blocks of state_, padding included (its
    // gradients are zero, so its zero params, m and v stay zero), writing
    // the compute copy as they go: bit-identical to the per-tensor calls
    // below followed by refresh_compute_weights, however the block is cut
    // (the update is elementwise).
    const OpScope op("adamw");
    if (std::exchange(layers_updated_, false)) {
      // The layers were swept in the backward pass; the embedding's
      // gradient is final only now.
      for (const ParamSpan& span : non_layer_spans_) sweep_adamw(span, hp, false);
      backend_.join_side_updates();  // the step ends with every update done
    } else {
      sweep_adamw({0, layout_.total()}, hp, false);
    }
    return;
  }
  // One optimizer call per parameter tensor, like PyTorch's for-loop AdamW.
  const auto elem = static_cast<std::int64_t>(dtype_size(plan_.precision.master));
  OpSequence ops;
  ops.next("adamw");
  for (const ParamSlot& s : layout_.slots()) {
    AdamWHyper slot_hp = hp;
    slot_hp.apply_decay = !(plan_.update.decay_matrices_only && s.is_norm);
    auto at = [&](void* block) {
      return Mat(static_cast<char*>(block) + s.offset * elem, plan_.precision.master, 1, s.numel());
    };
    backend_.adamw(at(params_), at(grads_), at(adam_m_), at(adam_v_), slot_hp);
  }
  ops.close();
  refresh_compute_weights();  // marks itself "refresh_weights" when it runs
}

}  // namespace tinyllama
