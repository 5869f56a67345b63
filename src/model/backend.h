#pragma once
// The op set the model's hand-written forward and backward passes call.
// The CPU backend is the obviously-correct reference; the CUDA backend
// implements the same contract with kernels. Every op takes Mat views, so a
// fused buffer can be handed out in column blocks without copies.
//
// Conventions shared by all backends:
//  * activations are in the precision's compute dtype; parameter gradients
//    in the master dtype; statistics (rstd, lse, losses) in Precision::stats();
//  * outputs are overwritten unless the op says it accumulates;
//  * no op allocates device memory (the arena is planned before step 1).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

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

// What one captured graph holds, by node type. Kernel nodes are the kernel
// launches of the captured work, library kernels (cuBLASLt) included.
struct GraphStats {
  int kernels = 0;
  int memsets = 0;
  int memcpys = 0;
  int other = 0;  // event records (timing marks), empty and host nodes
  int total() const { return kernels + memsets + memcpys + other; }
};

// Marks points in the backend's stream of work and reports the time between
// them: CUDA events on the GPU, a steady clock on the CPU. Recording never
// blocks; elapsed_ms waits for the later mark to complete.
class EventTimer {
 public:
  virtual ~EventTimer() = default;
  virtual void record(int mark) = 0;
  virtual double elapsed_ms(int from_mark, int to_mark) = 0;
};

// A host copy of device results taken in stream order, so a step's loss can
// be read after later steps have been enqueued (they may overwrite the
// device buffer; this copy was taken before they ran).
class HostReadback {
 public:
  virtual ~HostReadback() = default;
  // Enqueues a copy of `bytes` (at most the readback's size) from backend
  // memory, after the work enqueued so far. Not inside a captured region.
  virtual void copy_from(const void* src, std::size_t bytes) = 0;
  // Waits for the latest copy and returns its bytes.
  virtual const void* wait() = 0;
};

// Throws std::invalid_argument unless probs is given exactly when impl is
// Materialized (the backends' shared check of the attention contract).
void require_probs_match(AttentionImpl impl, Mat probs, const char* op);

// Whole-step graphs kept at once: one per step in flight, each recording its
// step's timing marks (two steps overlap at most: the next one is enqueued
// while the host reads back the last one).
constexpr int kGraphSlots = 2;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // One line: the device's name and size.
  virtual std::string device_description() const = 0;

  // What the device can do; resolve_plan() reads it.
  virtual DeviceCaps caps() const = 0;
  // Called once, before step 1, with the resolved plan: it sizes the
  // backend's own workspaces (plan.workspaces: GEMM workspace, attention
  // scratch), so that no op allocates, and says whether the weight-gradient
  // GEMMs and per-layer sweeps run on parallel branches.
  virtual void prepare(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) = 0;
  // Bytes of those workspaces: plan.workspace_bytes() after prepare().
  virtual std::int64_t workspace_bytes() const = 0;
  // The most memory in use on the device, as the driver counts it (every
  // allocation of the process, libraries' included), over the calls so far:
  // a sample per call, so a peak between calls is missed (the trainer calls
  // it after every step, and no step allocates); -1 if unknown.
  virtual std::int64_t device_peak_used_bytes() = 0;
  virtual std::unique_ptr<EventTimer> make_timer(int marks) = 0;
  // Choices the backend made by timing (GEMM algorithms), as text for a
  // checkpoint, and their restoration before a resumed run's first step, so
  // that it rounds as the uninterrupted run did. "" from restore, or why
  // nothing was restored. The defaults: nothing chosen by timing.
  virtual std::string tuning_state() const { return ""; }
  virtual std::string restore_tuning_state(const std::string& /*text*/) { return ""; }
  // A readback of up to `bytes`; the default copies synchronously (download).
  virtual std::unique_ptr<HostReadback> make_readback(std::size_t bytes);

  // --- memory (setup time only) -------------------------------------------
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;
  // Stream-ordered, so it may also run inside a step (the overflow flag).
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;
  virtual void synchronize() {}
  // Per-step inputs (the batch, the step's scalars): a stream-ordered copy
  // from host memory that does not wait for the device. host_src may be
  // reused as soon as the call returns (the backend stages the bytes). Not
  // inside a captured region: the graph would replay the staged bytes of
  // the capture.
  virtual void upload_async(void* dst, const void* host_src, std::size_t bytes) = 0;

  // --- whole-step graphs ------------------------------------------------------
  // A backend that can record the work it is given once and replay it with
  // one launch (CUDA graphs). Recording runs nothing: between begin_capture
  // and end_capture every op is only recorded, so an op that synchronises
  // with the host or allocates fails the capture.
  virtual bool supports_graphs() const { return false; }
  // Starts recording the backend's stream. Throws RuntimeFailure.
  virtual void begin_capture();
  // Stops recording. With instantiate, the recording becomes the graph that
  // replay(slot) launches (replacing any earlier one in that slot, 0 <= slot
  // < kGraphSlots); without, it is only counted and discarded. Throws
  // RuntimeFailure naming the cause, after discarding the recording and
  // clearing the device's error state, so the caller can go on eagerly.
  virtual GraphStats end_capture(bool instantiate, int slot);
  // Discards a recording left open by an exception inside it and clears the
  // error state; does nothing when no recording is open. Never throws.
  virtual void abort_capture() noexcept {}
  // Enqueues the graph instantiated in `slot` once. Throws RuntimeFailure.
  virtual void replay(int slot);

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
  // The point side_gemm_from_fork() starts after: the ops issued before this
  // call.
  virtual void fork_side_gemms() {}
  // side_gemm() that starts after the ops issued before the last
  // fork_side_gemms() rather than after every op issued before it. The
  // input-gradient GEMM on the critical path is issued first, between the
  // two calls, and so launched first: a weight-gradient GEMM launched
  // ahead of it takes the SMs it needs, and it waits. The caller makes sure
  // that nothing issued since the fork writes what this GEMM reads. The
  // default is side_gemm().
  virtual std::int64_t side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b,
                                           float alpha, float beta);
  // Orders every op issued after this call after the side GEMM `ticket`
  // (and all side GEMMs issued before it).
  virtual void join_side_gemm(std::int64_t /*ticket*/) {}
  // join_side_gemm for every side GEMM issued so far.
  virtual void join_side_gemms() {}
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

  // The exercise fault naive-swiglu (model/faults.h): out = x · wᵀ like
  // gemm(out, x, false, w, true, 1, 0), but slow on purpose -- on CUDA one
  // thread per output element reducing over x's columns, no tiles, no
  // tensor cores; on the CPU the reference loops instead of BLAS. The
  // default throws RuntimeFailure (a backend without it).
  virtual void naive_linear(Mat out, Mat x, Mat w);

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
  // The exercise fault noncontiguous-kv (model/faults.h): out and lse as
  // attention_forward(Flash, ...) leaves them, so the flash backward follows
  // unchanged, but slow on purpose -- on CUDA each lane of a warp reads its
  // own K/V rows (uncoalesced), nothing tiled; on the CPU the reference
  // loops instead of BLAS. The default throws RuntimeFailure.
  virtual void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                            const AttentionShape& shape);
  // RoPE's forward rotation inside attention: q, k, v as the QKV GEMM wrote
  // them (before RoPE) in; q_rot, k_rot = q, k rotated (rope_forward,
  // rope_theta, shape.head_dim) and v_copy = v out, where a backward would
  // read them; and attention_forward over those, as one op. The outputs
  // must not overlap the inputs. This default is that composition (the CPU
  // reference's implementation); the CUDA backend's flash kernels rotate
  // their Q and K tiles as they load them. The model does not call it: it
  // measured slower than rope_forward then attention (RopeImpl); the kernel
  // bench keeps it as attention.fwd flash+rope.
  virtual void attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k,
                                      Mat v, Mat q_rot, Mat k_rot, Mat v_copy,
                                      const AttentionShape& shape, double rope_theta);
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
  // Returns a ticket for join_side_update.
  virtual std::int64_t side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                        const AdamWHyper& hp);
  // Orders every op issued after this call after the side update `ticket`
  // (and every side update issued before it): GradBuffers::Ring joins a
  // layer's sweep before the layer two below overwrites the gradient slot
  // that the sweep reads.
  virtual void join_side_update(std::int64_t /*ticket*/) {}
  // Orders every op issued after this call after every side_adamw_fused so far.
  virtual void join_side_updates() {}

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

  // --- collectives (model/collectives.h) ---------------------------------------
  // The stream a collective issued now runs on beside the backward pass, as
  // an opaque handle (cudaStream_t): the side-update stream, ordered after
  // every op and side GEMM issued so far and before every later
  // side_adamw_fused, joined by join_side_updates -- so a layer's gradient
  // exchange, its sweep and its weight gather run in that order while the
  // backward pass goes on. Call end_side_collective after enqueuing. The
  // defaults (a backend that runs every op at once) return nullptr.
  virtual void* begin_side_collective() { return nullptr; }
  virtual void end_side_collective() {}
  // The stream every other op runs on, as an opaque handle; nullptr by default.
  virtual void* main_stream_handle() { return nullptr; }
  // *flag = 1 when any element of x is inf or nan; otherwise *flag is left
  // as it was (so several checks can share one flag). flag: device memory.
  virtual void flag_nonfinite(Mat x, std::int32_t* flag) = 0;
};

}  // namespace tinyllama
