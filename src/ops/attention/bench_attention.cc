// Causal GQA attention, forward and backward, materialised (the S x S
// probabilities kept for the backward, v1), flash (v2: only the
// log-sum-exp kept, P recomputed) or cuDNN's SDPA (the same contract). q, k and v are column blocks
// of one qkv buffer and dq, dk, dv of one d_qkv buffer, as the model lays them out.
#include <string>
#include <vector>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "core/errors.h"
#include "cpu/cpu_backend.h"
#include "ops/attention/bench_attention.h"

namespace tinyllama::bench {
namespace {

// Columns of heads `heads` in a [tokens, n_heads * hd] matrix, from `first`.
Index head_columns(const std::vector<std::int64_t>& heads, std::int64_t hd,
                   std::int64_t first = 0) {
  Index cols;
  for (const std::int64_t h : heads) {
    for (std::int64_t d = 0; d < hd; ++d) cols.push_back(first + h * hd + d);
  }
  return cols;
}

std::string list_heads(const std::vector<std::int64_t>& heads) {
  std::string s;
  for (const std::int64_t h : heads) s += (s.empty() ? "" : ",") + std::to_string(h);
  return s;
}

// The part of an attention op the check recomputes on the CPU: batch row 0
// and two whole kv groups (the first and the last), their query heads, and
// the rows and columns of each buffer they cover.
struct CheckedSlice {
  std::vector<std::int64_t> kv_heads;
  std::vector<std::int64_t> heads;  // the query heads of kv_heads
  AttentionShape sub;               // the slice's own shape (batch 1)
  Index positions;                  // batch row 0
  Index q_cols;
  Index kv_cols;
  // lse rows and probs rows of batch row 0 are indexed by head.
  Index lse_rows;
  Index prob_rows;
};

CheckedSlice checked_slice(const AttentionShape& shape) {
  CheckedSlice s;
  const std::int64_t hd = shape.head_dim;
  const std::int64_t seq = shape.seq;
  const std::int64_t group = shape.heads / shape.kv_heads;
  s.kv_heads = {0};
  if (shape.kv_heads > 1) s.kv_heads.push_back(shape.kv_heads - 1);
  for (const std::int64_t g : s.kv_heads) {
    for (std::int64_t j = 0; j < group; ++j) s.heads.push_back(g * group + j);
  }
  s.sub = AttentionShape{1, shape.seq, static_cast<int>(s.heads.size()),
                         static_cast<int>(s.kv_heads.size()), shape.head_dim};
  s.positions = all_of(seq);
  s.q_cols = head_columns(s.heads, hd);
  s.kv_cols = head_columns(s.kv_heads, hd);
  s.lse_rows = Index(s.heads.begin(), s.heads.end());
  for (const std::int64_t h : s.heads) {
    const Index r = range_of(h * seq, (h + 1) * seq);
    s.prob_rows.insert(s.prob_rows.end(), r.begin(), r.end());
  }
  return s;
}

// Why the flash kernel families `pins` names cannot run on ctx's device at
// this shape and precision, or "" when they can (no pin: "").
std::string pin_unavailable(const BenchContext& ctx, Pass pass, const KernelPins& pins) {
  const bool forward_pin = pins.flash_forward.has_value();
  const bool backward_pin = pins.flash_backward.has_value() || pins.flash_delta.has_value();
  if (!forward_pin && !backward_pin) return "";
  if (forward_pin != (pass == Pass::Forward)) return "pins the other pass's kernels";
  if (ctx.gpu.name() != "cuda") return "a CUDA kernel family";
  const bool delta_only = !forward_pin && !pins.flash_backward.has_value();
  if (delta_only) return "";  // every dtype's kernels have both
  if (ctx.act() == DType::F32) return "tensor-core kernels: bf16/fp16 only";
  if (pins.flash_forward == FlashForwardKernel::Mma ||
      pins.flash_backward == FlashBackwardKernel::Mma) {
    return "";
  }
  const int hd = ctx.cfg.head_dim();
  if (hd != 64 && hd != 128) return "Hopper kernels: head_dim 64 or 128 only";
  if (!ctx.gpu.caps().no_hopper_kernels.empty()) {
    return "Hopper kernels: needs an sm_90 device and an sm_90a build";
  }
  return "";
}

class AttentionCase final : public OpCase {
 public:
  AttentionCase(BenchContext& ctx, Pass pass, AttentionImpl impl, bool rope)
      : ctx_(ctx),
        buffers_(ctx.gpu, ctx.seed),
        shape_(ctx.attention()),
        pass_(pass),
        impl_(impl),
        rope_(rope) {
    const bool materialised = impl == AttentionImpl::Materialized;
    const std::int64_t t = ctx.tokens();
    const std::int64_t qd = ctx.cfg.q_dim();
    const std::int64_t kvd = ctx.cfg.kv_dim();
    const std::int64_t bh = static_cast<std::int64_t>(shape_.batch) * shape_.heads;
    const DType act = ctx.act();
    // Uniform in [-2, 2): scores q·k/sqrt(hd) of about one unit, so the
    // softmax is neither flat nor one-hot.
    qkv_ = buffers_.random(t, qd + 2 * kvd, act, -2, 2);
    q_ = qkv_.col_block(0, qd);
    k_ = qkv_.col_block(qd, kvd);
    v_ = qkv_.col_block(qd + kvd, kvd);
    out_ = buffers_.poisoned(t, qd, act);
    lse_ = buffers_.poisoned(bh, shape_.seq, ctx.stats());
    if (rope && pass == Pass::Forward) {  // where the rotated q, k and v's copy go
      const Mat rot = buffers_.poisoned(t, qd + 2 * kvd, act);
      q_rot_ = rot.col_block(0, qd);
      k_rot_ = rot.col_block(qd, kvd);
      v_copy_ = rot.col_block(qd + kvd, kvd);
    }
    if (materialised) probs_ = buffers_.poisoned(bh * shape_.seq, shape_.seq, act);
    if (pass == Pass::Backward) {
      dout_ = buffers_.random(t, qd, act, -1, 1);
      const Mat dqkv = buffers_.poisoned(t, qd + 2 * kvd, act);
      dq_ = dqkv.col_block(0, qd);
      dk_ = dqkv.col_block(qd, kvd);
      dv_ = dqkv.col_block(qd + kvd, kvd);
      // The backward reads what the forward saved (out, lse, probs).
      ctx.gpu.attention_forward(impl_, out_, lse_, probs_, q_, k_, v_, shape_);
    }
  }

  void run() override {
    if (pass_ == Pass::Forward && rope_) {
      exercise_ops().attention_rope_forward(impl_, out_, lse_, probs_, q_, k_, v_, q_rot_, k_rot_,
                                            v_copy_, shape_, ctx_.cfg.rope_theta);
    } else if (pass_ == Pass::Forward) {
      ctx_.gpu.attention_forward(impl_, out_, lse_, probs_, q_, k_, v_, shape_);
    } else if (rope_) {
      ctx_.gpu.attention_rope_backward(impl_, dq_, dk_, dv_, dout_, q_, k_, v_, out_, lse_, probs_,
                                       shape_, ctx_.cfg.rope_theta);
    } else {
      ctx_.gpu.attention_backward(impl_, dq_, dk_, dv_, dout_, q_, k_, v_, out_, lse_, probs_,
                                  shape_);
    }
  }

  // Batches are independent and so are kv groups: the reference runs batch
  // row 0 and two whole kv groups (the first and the last), which covers
  // the GQA mapping at both ends of the heads in a fraction of the work.
  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const std::int64_t seq = shape_.seq;
    const CheckedSlice slice = checked_slice(shape_);
    const std::vector<std::int64_t>& kv_heads = slice.kv_heads;
    const std::vector<std::int64_t>& heads = slice.heads;
    const AttentionShape& sub = slice.sub;
    const Index& positions = slice.positions;
    const Index& q_cols = slice.q_cols;
    const Index& kv_cols = slice.kv_cols;
    const Index& lse_rows = slice.lse_rows;
    const Index& prob_rows = slice.prob_rows;
    const bool materialised = !probs_.empty();

    HostMat q = gather(gpu, q_, positions, q_cols);
    HostMat k = gather(gpu, k_, positions, kv_cols);
    HostMat v = gather(gpu, v_, positions, kv_cols);
    CpuBackend cpu;
    Comparison cmp;
    const std::int64_t rows = seq;
    if (pass_ == Pass::Forward) {
      run();
      HostMat out(rows, static_cast<std::int64_t>(q_cols.size()));
      HostMat lse(static_cast<std::int64_t>(heads.size()), seq);
      HostMat probs(materialised ? static_cast<std::int64_t>(prob_rows.size()) : 0, seq);
      const Mat ref_probs = materialised ? probs.mat() : Mat();
      if (rope_) {  // the composition: q and k rotated (v copied), then attention
        HostMat q_rot(rows, static_cast<std::int64_t>(q_cols.size()));
        HostMat k_rot(rows, static_cast<std::int64_t>(kv_cols.size()));
        HostMat v_copy(rows, static_cast<std::int64_t>(kv_cols.size()));
        cpu.attention_rope_forward(reference_impl(), out.mat(), lse.mat(), ref_probs, q.mat(),
                                   k.mat(), v.mat(), q_rot.mat(), k_rot.mat(), v_copy.mat(), sub,
                                   ctx_.cfg.rope_theta);
        cmp.add("q_rot", gather(gpu, q_rot_, positions, q_cols), q_rot);
        cmp.add("k_rot", gather(gpu, k_rot_, positions, kv_cols), k_rot);
        cmp.add("v_copy", gather(gpu, v_copy_, positions, kv_cols), v_copy);
      } else {
        cpu.attention_forward(reference_impl(), out.mat(), lse.mat(), ref_probs, q.mat(), k.mat(),
                              v.mat(), sub);
      }
      cmp.add("out", gather(gpu, out_, positions, q_cols), out);
      cmp.add("lse", gather(gpu, lse_, lse_rows, all_of(seq)), lse);
      if (materialised) cmp.add("probs", gather(gpu, probs_, prob_rows, all_of(seq)), probs);
    } else {
      // The forward's results as the GPU saved them, which its backward reads.
      HostMat dout = gather(gpu, dout_, positions, q_cols);
      HostMat out = gather(gpu, out_, positions, q_cols);
      HostMat lse = gather(gpu, lse_, lse_rows, all_of(seq));
      HostMat probs = materialised ? gather(gpu, probs_, prob_rows, all_of(seq)) : HostMat(0, seq);
      run();
      HostMat dq(rows, static_cast<std::int64_t>(q_cols.size()));
      HostMat dk(rows, static_cast<std::int64_t>(kv_cols.size()));
      HostMat dv(rows, static_cast<std::int64_t>(kv_cols.size()));
      const Mat ref_probs = materialised ? probs.mat() : Mat();
      if (rope_) {  // the composition: attention's backward, then rope_backward on dq and dk
        cpu.attention_rope_backward(reference_impl(), dq.mat(), dk.mat(), dv.mat(), dout.mat(),
                                    q.mat(), k.mat(), v.mat(), out.mat(), lse.mat(), ref_probs, sub,
                                    ctx_.cfg.rope_theta);
      } else {
        cpu.attention_backward(reference_impl(), dq.mat(), dk.mat(), dv.mat(), dout.mat(), q.mat(),
                               k.mat(), v.mat(), out.mat(), lse.mat(), ref_probs, sub);
      }
      cmp.add("dq", gather(gpu, dq_, positions, q_cols), dq);
      cmp.add("dk", gather(gpu, dk_, positions, kv_cols), dk);
      cmp.add("dv", gather(gpu, dv_, positions, kv_cols), dv);
    }
    return cmp.result("batch row 0 of " + std::to_string(shape_.batch) + ", kv heads " +
                      list_heads(kv_heads) + " (query heads " + list_heads(heads) + "), all " +
                      std::to_string(seq) + " positions");
  }

 private:
  // The device's exercise ops (model/exercise_ops.h): attention_rope_forward.
  ExerciseOps& exercise_ops() {
    ExerciseOps* ops = ctx_.gpu.exercise_ops();
    if (ops == nullptr) {
      throw RuntimeFailure("attention.fwd flash+rope: the " + ctx_.gpu.name() +
                           " backend has no attention_rope_forward");
    }
    return *ops;
  }

  // The CPU reference runs in the same mode: P stored, or from lse.
  AttentionImpl reference_impl() const {
    return impl_ == AttentionImpl::Materialized ? AttentionImpl::Materialized
                                                : AttentionImpl::Flash;
  }

  BenchContext& ctx_;
  DeviceBuffers buffers_;
  AttentionShape shape_;
  Pass pass_;
  AttentionImpl impl_;
  bool rope_;
  Mat qkv_, q_, k_, v_, out_, lse_, probs_;
  Mat q_rot_, k_rot_, v_copy_;  // rope on the forward pass
  Mat dout_, dq_, dk_, dv_;
};

}  // namespace

std::unique_ptr<OpCase> make_attention(BenchContext& ctx, Pass pass, AttentionImpl impl,
                                       const KernelPins& pins, bool rope) {
  const std::string why = pin_unavailable(ctx, pass, pins);
  if (!why.empty()) throw OpSkipped(why);
  return std::make_unique<AttentionCase>(ctx, pass, impl, rope);
}

}  // namespace tinyllama::bench
