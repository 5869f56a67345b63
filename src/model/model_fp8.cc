// The linear layers' GEMMs under --amp-dtype float8 (model.h, issue 45):
// each GEMM StepPlan::fp8 puts in FP8 reads FP8 copies of its operands,
// quantised here with one scale per tensor; the others run in bf16 as they
// do without FP8.
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model.h"

#include "core/op_marker.h"

namespace tinyllama {

// Delayed scaling: a training pass with a history first updates every
// scale from it (two launches: the E4M3 blocks, the E5M2 ones), then casts
// in one pass each, recording the amaxes; the first training pass has no
// history and scales as current scaling does, which records them too. An
// evaluation pass keeps the scales and records nothing, so evaluating never
// changes the training run's trajectory (before any training pass it
// scales as current scaling does, and the first training pass overwrites
// what it left).
void Model::begin_fp8_pass(bool records) {
  fp8_fresh_ = Fp8ScaleFrom::Amax;
  if (!delayed_fp8()) return;
  if (!records) {
    if (fp8_history_warm_) fp8_fresh_ = Fp8ScaleFrom::Kept;
    return;
  }
  if (fp8_history_warm_) {
    for (const Fp8ScalarBlocks& b : acts_.fp8.scalar_blocks(arena_)) {
      backend_.fp8_update_scales(b.blocks, b.count, b.format);
    }
    fp8_fresh_ = Fp8ScaleFrom::History;
  }
  fp8_history_warm_ = true;
}

// The amaxes sit one per block (kFp8Amax), among the scales and the
// history, which are alike on every rank already; a reduction of whole
// blocks would take the largest scale too, which belongs to the smallest
// amax. So the amaxes are gathered into one packed row (the strided
// conversion), reduced once, and put back.
void Model::reduce_fp8_amaxes() {
  if (!reduces_fp8_amaxes()) return;
  const OpScope op("fp8_amax_reduce");
  const auto each_block_group = [&](auto&& fn) {
    std::int64_t at = 0;
    for (const Fp8ScalarBlocks& b : acts_.fp8.scalar_blocks(arena_)) {
      fn(Mat(b.blocks + kFp8Amax, DType::F32, b.count, 1, kFp8Block),
         Mat(fp8_amaxes_ + at, DType::F32, b.count, 1));
      at += b.count;
    }
    return at;
  };
  const std::int64_t count =
      each_block_group([&](Mat in_blocks, Mat packed) { backend_.convert(packed, in_blocks); });
  comm_->all_reduce(fp8_amaxes_, count, DType::F32, ReduceOp::Max, backend_.main_stream_handle());
  each_block_group([&](Mat in_blocks, Mat packed) { backend_.convert(in_blocks, packed); });
}

std::size_t Model::fp8_scaling_floats() const {
  if (!delayed_fp8()) return 0;
  std::size_t n = 0;
  for (const Fp8ScalarBlocks& b : acts_.fp8.scalar_blocks(arena_)) {
    n += static_cast<std::size_t>(b.count) * kFp8Block;
  }
  return n;
}

std::vector<float> Model::fp8_scaling_state() const {
  std::vector<float> out(fp8_scaling_floats());
  if (out.empty()) return out;
  std::size_t at = 0;
  for (const Fp8ScalarBlocks& b : acts_.fp8.scalar_blocks(arena_)) {
    const std::size_t n = static_cast<std::size_t>(b.count) * kFp8Block;
    backend_.download(out.data() + at, b.blocks, n * sizeof(float));
    at += n;
  }
  return out;
}

void Model::set_fp8_scaling_state(const std::vector<float>& blocks) {
  const std::size_t expected = fp8_scaling_floats();
  if (blocks.size() != expected) {
    throw std::invalid_argument("set_fp8_scaling_state: " + std::to_string(blocks.size()) +
                                " floats, expected " + std::to_string(expected));
  }
  std::size_t at = 0;
  for (const Fp8ScalarBlocks& b : acts_.fp8.scalar_blocks(arena_)) {
    const std::size_t n = static_cast<std::size_t>(b.count) * kFp8Block;
    backend_.upload(b.blocks, blocks.data() + at, n * sizeof(float));
    at += n;
  }
  fp8_history_warm_ = true;
}

// W's FP8 copy q, cast from w: the compute copy, or where the plan keeps
// none (compute_weight) the fp32 master read as its bf16 values.
Fp8Tensor Model::fp8_weight(Fp8Tensor q, const Mat& w) const {
  q.rounds_to_bf16 = w.dtype != plan_.precision.compute;
  return q;
}

void Model::fp8_forward(LinearKind kind, int l, Mat y, Mat x, Mat w, const Mat* residual,
                        Fp8Made made) {
  const LinearShape s = linear_shape(cfg_, shape_, kind);
  const Fp8Tensor qx = acts_.fp8.forward_input(arena_, kind, l, s);
  const Fp8Tensor qw = fp8_weight(acts_.fp8.forward_weight(arena_, kind, l, s), w);
  if (!made.x) backend_.quantize_fp8(x, qx, fp8_fresh_);
  backend_.quantize_fp8(w, qw, fp8_fresh_);
  if (residual != nullptr) {
    backend_.gemm_fp8_add(y, qx, false, qw, true, *residual);
    return;
  }
  backend_.gemm_fp8(y, qx, false, qw, true, /*accumulate=*/false);
}

void Model::linear_forward(LinearKind kind, int l, Mat y, Mat x, Mat w, Fp8Made made) {
  if (plan_.fp8.at(kind, LinearPass::Forward)) {
    fp8_forward(kind, l, y, x, w, /*residual=*/nullptr, made);
    return;
  }
  backend_.gemm(y, x, false, w, true, 1.0f, 0.0f);
}

void Model::linear_forward_add(LinearKind kind, int l, Mat y, Mat x, Mat w, Mat residual,
                               Fp8Made made) {
  if (!plan_.fp8.at(kind, LinearPass::Forward)) {
    backend_.gemm_add(y, x, false, w, true, residual);
    return;
  }
  fp8_forward(kind, l, y, x, w, &residual, made);
}

// The forward's codes of hidden for the down projection's FP8 forward,
// and where the plan keeps them (Fp8Linears::swiglu_keeps_codes) the
// layer's transposed codes for its weight gradient; in the backward's
// recompute, that transpose, with the forward's scale where the forward
// was FP8. hidden is kept only where the backward reads it: a stored hidden
// (not recomputed, not kept as codes) is the weight gradient's input.
Fp8Made Model::swiglu_forward_for_fp8(int l, Mat hidden, Mat gate, Mat up, bool recompute) {
  Fp8Made made;
  const LinearKind down = LinearKind::Down;
  const LinearPass reader = recompute ? LinearPass::Wgrad : LinearPass::Forward;
  if (!swiglu_writes_fp8() || !plan_.fp8.at(down, reader)) return made;
  const LinearShape s = linear_shape(cfg_, shape_, down);
  if (recompute) {
    backend_.swiglu_forward_fp8(hidden, gate, up, acts_.fp8.backward_input(arena_, down, l, s),
                                fp8_input_scale(down), /*keep_hidden=*/false);
    made.x_t = true;
    return made;
  }
  Fp8Tensor q = acts_.fp8.forward_input(arena_, down, l, s);
  made.x = true;
  made.x_t = plan_.fp8.swiglu_keeps_codes;
  if (made.x_t) q.codes_t = acts_.fp8.backward_input(arena_, down, l, s).codes_t;
  backend_.swiglu_forward_fp8(hidden, gate, up, q, fp8_fresh_,
                              /*keep_hidden=*/!recompute_swiglu() && !made.x_t);
  return made;
}

// The gate/up gradient's FP8 copies for that linear's backward GEMMs; its
// bf16 values kept only for a GEMM of the two left in bf16.
Fp8Made Model::swiglu_backward_for_fp8(int l, Mat d_gate_up, Mat d_hidden, Mat gate, Mat up) {
  Fp8Made made;
  const LinearKind gu = LinearKind::GateUp;
  if (!swiglu_writes_fp8() || !plan_.fp8.backward(gu)) return made;
  const bool dgrad = plan_.fp8.at(gu, LinearPass::Dgrad);
  const bool wgrad = plan_.fp8.at(gu, LinearPass::Wgrad);
  const Fp8Tensor q =
      acts_.fp8.gradient(arena_, gu, l, linear_shape(cfg_, shape_, gu), dgrad, wgrad);
  backend_.swiglu_backward_fp8(d_gate_up, d_hidden, gate, up, q, fp8_fresh_,
                               /*keep_grads=*/!(dgrad && wgrad));
  made.dy = true;
  return made;
}

// The forward's norm of the QKV or gate/up projection's input; its codes
// for that GEMM where the plan has the norm write them. The bf16 output is
// kept where the backward reads it (a stored norm, not recomputed).
Fp8Made Model::norm_forward(LinearKind kind, int l, Mat out, Mat rstd, Mat x, Mat weight) {
  Fp8Made made;
  if (!plan_.fp8.norm_casts || !plan_.fp8.at(kind, LinearPass::Forward)) {
    backend_.rmsnorm_forward(out, rstd, x, weight, cfg_.rms_eps);
    return made;
  }
  const Fp8Tensor q = acts_.fp8.forward_input(arena_, kind, l, linear_shape(cfg_, shape_, kind));
  backend_.rmsnorm_forward_fp8(out, rstd, x, weight, cfg_.rms_eps, q, fp8_fresh_,
                               /*keep_out=*/!recompute_norms());
  made.x = true;
  return made;
}

// x's and W's transposed copies take the forward's scale when it was FP8
// (the same tensors: the same codes), else their own.
Fp8ScaleFrom Model::fp8_input_scale(LinearKind kind) const {
  return plan_.fp8.at(kind, LinearPass::Forward) ? Fp8ScaleFrom::Kept : fp8_fresh_;
}

Model::Fp8Grads Model::fp8_backward_operands(LinearKind kind, int l, Mat d_out, Mat in, Mat w,
                                             Fp8Made made) {
  const bool dgrad = plan_.fp8.at(kind, LinearPass::Dgrad);
  const bool wgrad = plan_.fp8.at(kind, LinearPass::Wgrad);
  Fp8Grads q;
  if (!dgrad && !wgrad) return q;
  const LinearShape s = linear_shape(cfg_, shape_, kind);
  q.dy = acts_.fp8.gradient(arena_, kind, l, s, dgrad, wgrad);
  if (!made.dy) backend_.quantize_fp8(d_out, q.dy, fp8_fresh_);
  if (dgrad) {
    q.w_t = fp8_weight(acts_.fp8.backward_weight(arena_, kind, l, s), w);
    backend_.quantize_fp8(w, q.w_t, fp8_input_scale(kind));
  }
  if (wgrad) {
    q.x_t = acts_.fp8.backward_input(arena_, kind, l, s);
    if (!made.x_t) backend_.quantize_fp8(in, q.x_t, fp8_input_scale(kind));
  }
  return q;
}

void Model::linear_dgrad(LinearKind kind, const Fp8Grads& q, Mat d_in, Mat d_out, Mat w) {
  if (plan_.fp8.at(kind, LinearPass::Dgrad)) {
    backend_.gemm_fp8(d_in, q.dy, false, q.w_t, false, false);
    return;
  }
  backend_.gemm(d_in, d_out, false, w, false, 1.0f, 0.0f);
}

std::int64_t Model::linear_wgrad(LinearKind kind, const Fp8Grads& q, Mat dw, Mat d_out, Mat in) {
  if (plan_.fp8.at(kind, LinearPass::Wgrad)) {
    return backend_.side_gemm_fp8_from_fork(dw, q.dy, true, q.x_t, false, false);
  }
  return backend_.side_gemm_from_fork(dw, d_out, true, in, false, 1.0f, 0.0f);
}

}  // namespace tinyllama
