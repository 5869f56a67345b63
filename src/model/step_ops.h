#pragma once
// The op set the model's hand-written forward and backward passes call.
// The CPU backend is the obviously-correct reference; the CUDA backend
// implements the same contract with kernels. Every op takes Mat views, so a
// fused buffer can be handed out in column blocks without copies. Only the
// ops a training step runs are here: the device's services (memory, graphs,
// stream joins) are model/device_services.h, and the ops that exist for the
// debugging exercise and the kernel bench alone are model/exercise_ops.h,
// so that this file is the whole contract a new backend's kernels must meet.
//
// Conventions shared by all backends:
//  * activations are in the precision's compute dtype; parameter gradients
//    in the master dtype; statistics (rstd, lse, losses) in Precision::stats();
//  * outputs are overwritten unless the op says it accumulates;
//  * no op allocates device memory (the arena is planned before step 1).
#include <cstdint>

#include "core/mat.h"
#include "model/config.h"
#include "model/step_plan.h"
#include "model/step_scalars.h"

namespace tinyllama {

struct AttentionShape {
  int batch = 0;
  int seq = 0;
  int heads = 0;     // query heads H
  int kv_heads = 0;  // K; query head h reads kv head h / (H / K)
  int head_dim = 0;
};

// The attention of a model at a batch shape.
inline AttentionShape attention_shape(const ModelConfig& cfg, BatchShape shape) {
  return {shape.batch, shape.seq, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim()};
}

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  int step = 1;  // 1-based, for bias correction
  // fp16 loss scaling: gradients arrive multiplied by grad_scale and the
  // update divides it out. When skip_flag (device memory) is non-null and
  // holds a non-zero value, the update is skipped entirely; it is read on the
  // device, so deciding to skip costs no host sync.
  float grad_scale = 1.0f;
  const std::int32_t* skip_flag = nullptr;
  // When set (backend memory), lr, step and grad_scale are read from here
  // when the update runs and the three fields above are ignored: a captured
  // optimizer step then replays with each step's values. beta1, beta2, eps
  // and weight_decay stay launch arguments and must match the ones the
  // scalars were made with (make_step_scalars).
  const StepScalars* scalars = nullptr;
  // False for a tensor outside the weight-decay group (UpdateRecipe::
  // decay_matrices_only's norm weights): the update skips the decay.
  bool apply_decay = true;
};

// Throws std::invalid_argument unless probs is given exactly when impl is
// Materialized (the backends' shared check of the attention contract).
void require_probs_match(AttentionImpl impl, Mat probs, const char* op);

class StepOps {
 public:
  virtual ~StepOps() = default;

  // dst = src converted to dst.dtype (master weights -> compute copy).
  virtual void convert(Mat dst, Mat src) = 0;

  // --- dense algebra -------------------------------------------------------
  // c = alpha * op(a) * op(b) + beta * c, row-major; op transposes when the
  // flag is set. c may be wider-typed than a and b (fp32 weight gradients
  // from bf16 activations).
  virtual void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) = 0;
  // d = op(a) * op(b) + c (GemmEpilogue::Residual: a projection that adds
  // into the residual stream). d and c have one shape; d may alias c. The
  // CUDA backend runs one GEMM with beta = 1 reading c and writing d, so the
  // sum is rounded once; the default is a GEMM into d, then add().
  virtual void gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool trans_b, Mat c);
  // gemm() that may run concurrently with the ops issued after it, until
  // join_side_gemm(ticket) or join_side_gemms(); it starts after every op
  // issued before it. For the weight gradients of the backward pass: the
  // caller joins before any op that overwrites what the GEMM reads, and
  // before anything reads c. The CUDA backend with CUDA graphs on runs it
  // on a second stream (a parallel branch of the captured step); the
  // default runs gemm() at once and returns ticket 0.
  virtual std::int64_t side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                 float beta);
  // side_gemm() that starts after the ops issued before the last
  // fork_side_gemms() rather than after every op issued before it. The
  // input-gradient GEMM on the critical path is issued first, between the
  // two calls, and so launched first: a weight-gradient GEMM launched
  // ahead of it takes the SMs it needs, and it waits. The caller makes sure
  // that nothing issued since the fork writes what this GEMM reads. The
  // default is side_gemm().
  virtual std::int64_t side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b,
                                           float alpha, float beta);
  // out = a + b elementwise; out may alias a or b.
  virtual void add(Mat out, Mat a, Mat b) = 0;
  // out = a * b elementwise; out may alias a or b.
  virtual void mul(Mat out, Mat a, Mat b) = 0;

  // --- embedding -----------------------------------------------------------
  // out[i] = table[tokens[i]]; tokens has out.rows entries (device memory).
  virtual void embedding_forward(Mat out, const std::int32_t* tokens, Mat table) = 0;
  // dtable[tokens[i]] += dout[i] (accumulates: the tied LM head wrote first).
  virtual void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) = 0;
  // Whatever of embedding_backward depends on the tokens alone (CUDA's
  // sorted gradient: the sort), issued now, beside the ops that follow, so
  // that the next embedding_backward over the same tokens, n positions and
  // a table of `vocab` rows does only the rest. Optional: by default nothing,
  // and every embedding_backward does all of its work.
  virtual void embedding_backward_prepare(const std::int32_t* /*tokens*/, std::int64_t /*n*/,
                                          std::int64_t /*vocab*/) {}

  // --- RMSNorm: y = x / sqrt(mean(x^2) + eps) * w --------------------------
  // rstd: [rows, 1] in stats dtype, saved for backward.
  virtual void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) = 0;
  // dx and dweight ([1, D], master dtype) are overwritten.
  virtual void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) = 0;
  // NormImpl::Fused, forward: sum = a + b (rounded to sum's dtype; sum may
  // alias a or b), then out = RMSNorm(sum) as rmsnorm_forward computes it
  // from the stored sum. One pass instead of an add and a norm.
  virtual void add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                                   double eps) = 0;
  // NormImpl::Fused, backward: dx = dresidual + the norm's input gradient
  // (summed before rounding), dweight as rmsnorm_backward; dx may alias
  // dresidual or dout.
  virtual void rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                                    Mat dresidual) = 0;
  // out = x * rstd * weight with the rstd that rmsnorm_forward (or
  // add_rmsnorm_forward) saved for this x: bit-identical to the out it
  // wrote. ActivationsImpl::RecomputeNorms's backward pass remakes the
  // normalised inputs with it instead of keeping them per layer.
  virtual void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) = 0;

  // --- RoPE, interleaved pairs, in place -----------------------------------
  // x: [batch*seq, n_heads*head_dim]; row r is position r % seq.
  virtual void rope_forward(Mat x, int seq, int head_dim, double theta) = 0;
  // The inverse rotation: the gradient of an orthogonal map.
  virtual void rope_backward(Mat dx, int seq, int head_dim, double theta) = 0;

  // --- causal GQA attention, scale 1/sqrt(hd) -------------------------------
  // q, out: [B*S, H*hd]; k, v: [B*S, K*hd]; lse: [B*H, S] stats dtype.
  // impl Materialized: probs [B*H*S, S] holds the softmax probabilities for
  // backward; impl Flash: probs is empty and backward recomputes them from
  // lse. A backend refuses a probs that does not match impl.
  virtual void attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k,
                                 Mat v, const AttentionShape& shape) = 0;
  // dq, dk, dv overwritten; dk/dv sum over the query heads of each group.
  virtual void attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                                  Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                  const AttentionShape& shape) = 0;
  // RopeImpl::Fused: attention_backward, then rope_backward (rope_theta,
  // shape.head_dim) on dq and dk, as one op. This default is that
  // composition (the CPU reference's implementation); the CUDA backend
  // rotates dQ and dK in its flash kernels before rounding them.
  virtual void attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                                       Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                       const AttentionShape& shape, double rope_theta);

  // --- SwiGLU pieces --------------------------------------------------------
  virtual void silu_forward(Mat out, Mat x) = 0;
  virtual void silu_backward(Mat dx, Mat dout, Mat x) = 0;
  // Fused: out = silu(gate) * up.
  virtual void swiglu_forward(Mat out, Mat gate, Mat up) = 0;
  virtual void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) = 0;
  // SwigluImpl::Gemm, forward: gate_up [N, 2F] = x w_gu^T (gate in columns
  // [0, F), up in [F, 2F)), then hidden [N, F] = silu(gate) * up. The
  // default is those two ops; a backend with one kernel for both overrides.
  virtual void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu);
  // Backward: d_hidden = d_out w_down (w_down [D, F]), then swiglu_backward
  // into d_gate_up's halves from gate_up's. The default stores d_hidden in
  // the given buffer; a fused override need not touch it.
  virtual void gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                                    Mat gate_up);

  // --- loss ------------------------------------------------------------------
  // losses[i] = logsumexp(logits[i]) - logits[i][targets[i]]  ([rows,1] stats dtype)
  virtual void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) = 0;
  // dlogits = (softmax(logits) - onehot(targets)) * scale; dlogits may alias logits.
  virtual void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                      float scale) = 0;
  // The same with scale = step->ce_grad_scale read when the op runs (step in
  // backend memory), so a captured step replays with each step's loss scale.
  virtual void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                      const StepScalars* step) = 0;
  // LossImpl::Chunked: cross_entropy_forward, then cross_entropy_backward in
  // place (dlogits over the logits, scale step->ce_grad_scale), as one op.
  virtual void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                                   const StepScalars* step) = 0;

  // --- optimizer ---------------------------------------------------------------
  // PyTorch AdamW on one contiguous block (param, grad, m, v share a shape).
  virtual void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) = 0;
  // The same over the whole flat state block in one sweep (padding included:
  // zero grads and zero params stay zero), also writing compute_copy =
  // param converted to its dtype when compute_copy is non-empty (AMP), so no
  // separate convert pass follows. Must be bit-identical to adamw followed by
  // convert(compute_copy, param); this default is that composition (the CPU
  // reference's implementation). param, grad, m, v, compute_copy contiguous.
  virtual void adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                           const AdamWHyper& hp);
  // adamw_fused() that may run concurrently with the ops issued after it,
  // until join_side_updates(); it starts after every op and every side GEMM
  // issued before it. For one layer's parameters, whose gradients are final
  // while the backward pass goes on through the layers below: the caller
  // joins before anything reads or writes those parameters, moments or
  // compute copy again. The CUDA backend with CUDA graphs on runs it on a
  // stream of its own (a third branch of the captured step); the default
  // joins the side GEMMs, runs adamw_fused() at once and returns ticket 0.
  // Returns a ticket for join_side_update. (The default is Backend's: the
  // joins are DeviceServices'.)
  virtual std::int64_t side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                        const AdamWHyper& hp) = 0;

  // --- the gradient norm (UpdateRecipe: clipping, --log-grad-norm) ---------------
  // Doubles of backend memory sum_squares uses beside its accumulator.
  static constexpr int kSumSquaresScratch = 1024;
  // acc[0] += the sum of x's squared elements, in double, summed in an order
  // fixed by x's size alone (the same bits on every run, so a clipped run
  // resumes bit-exactly). acc: 1 + kSumSquaresScratch doubles of backend
  // memory; acc[1..] is scratch for partial sums.
  virtual void sum_squares(Mat x, double* acc) = 0;
  // From acc[0], the squared norm of the gradients as they are stored:
  // *norm = sqrt(acc[0]) * step->unscale (the norm of the unscaled
  // gradient, rounded to float), and with max_norm > 0 step->clip =
  // min(1, max_norm / (norm + 1e-6)) (torch.nn.utils.clip_grad_norm_'s
  // coefficient), which the AdamW updates multiply into the gradient.
  // acc, step and norm: backend memory; runs in stream order.
  virtual void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) = 0;

  // *flag = 1 when any element of x is inf or nan; otherwise *flag is left
  // as it was (so several checks can share one flag). flag: device memory.
  virtual void flag_nonfinite(Mat x, std::int32_t* flag) = 0;
};

}  // namespace tinyllama
