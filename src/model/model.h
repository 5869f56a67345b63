#pragma once
// The Tiny LLaMA model: parameters in one flat block, activations in one
// arena planned from the config, and the forward and backward passes written
// out by hand (no autograd) against the Backend op set.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/op_marker.h"
#include "model/activation_plan.h"
#include "model/backend.h"
#include "model/collectives.h"
#include "model/compute_copy.h"
#include "model/config.h"
#include "model/grad_layout.h"
#include "model/param_layout.h"

namespace tinyllama {

// Bytes a run holds on its device, by category (exact, from the plans): the
// figure the memory check refuses by and the peak the summary reports.
struct MemoryBreakdown {
  std::int64_t parameters = 0;  // master weights (+ compute copy under AMP)
  std::int64_t gradients = 0;
  std::int64_t optimizer = 0;    // AdamW m and v
  std::int64_t activations = 0;  // the planned arena, token buffers
  std::int64_t workspaces = 0;   // the backend's (StepPlan::workspaces)
  std::int64_t total() const {
    return parameters + gradients + optimizer + activations + workspaces;
  }
};

// --log-logit-stats (model_logit_stats.cc): over every position and
// vocabulary entry of a batch.
struct LogitStats {
  double mean = 0;
  double std = 0;
  double max = 0;
};

// FP8 copies of a linear's operands that the op producing the operand
// wrote itself (Fp8Linears::swiglu_casts): the model casts nothing for them.
struct Fp8Made {
  bool x = false;    // the forward's input
  bool dy = false;   // the backward's dy, every copy its GEMMs read
  bool x_t = false;  // the weight gradient's x^T
};

class Model {
 public:
  // The plan must have been resolved for cfg and shape (resolve_plan); the
  // model prepares the backend with it. With plan.parallel.enabled the
  // model is one rank of a data-parallel run: `collectives` (outliving the
  // model) connects it to the others, and `shape` is this rank's share of
  // the global batch.
  Model(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan, Backend& backend,
        Collectives* collectives = nullptr);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  // Where the gradients live (the plan's GradBuffers).
  const GradLayout& grad_layout() const { return grad_layout_; }
  const StepPlan& plan() const { return plan_; }
  Precision precision() const { return plan_.precision; }
  BatchShape shape() const { return shape_; }
  Backend& backend() { return backend_; }
  MemoryBreakdown memory() const;
  static MemoryBreakdown estimate_memory(const ModelConfig& cfg, BatchShape shape,
                                         const StepPlan& plan);

  // Host exchange of the flat parameter / gradient blocks (layout().total()
  // elements, padding included), converted from or to the master dtype.
  // In a data-parallel run, reading the weights, moments or state below is
  // a collective when the optimizer is sharded (every rank must call it at
  // the same point, between steps); the gradients are read as they are
  // (under ZeRO-1 only this rank's shards are reduced).
  void set_params(const std::vector<double>& host);
  std::vector<double> params() const;
  // Throws std::logic_error under GradBuffers::Ring, which keeps no whole
  // gradient (resolve the plan with PlanRequest::whole_gradient_reader).
  std::vector<double> grads() const;
  // AdamW's first and second moments, the same layout (tests compare paths).
  std::vector<double> adam_m() const;
  std::vector<double> adam_v() const;
  // The training state exactly, as raw master-dtype bytes (checkpoints):
  // the master weights and both AdamW moments in state_layout(), the
  // single-rank layout with the embedding's vocab_size rows only
  // (VocabRows::Exact), whatever the ranks, so a checkpoint resumes on any
  // number of them and never holds the LM head's padded rows. Setting a
  // block zeroes those rows and every other padding, as in a new model, and
  // setting the weights refreshes their compute copy under AMP.
  enum class StateBlock { Params, AdamM, AdamV };
  std::vector<std::uint8_t> state_bytes(StateBlock block) const;
  void set_state_bytes(StateBlock block, const std::vector<std::uint8_t>& bytes);
  const ParamLayout& state_layout() const { return canonical_; }
  // Delayed FP8 scaling's state (--fp8-scaling delayed): every FP8
  // tensor's scalar block, amax history included, for checkpoints; empty
  // under current scaling or without FP8. Setting it (the same size) makes
  // the next training step scale from the history, as the run that saved it
  // would have.
  std::vector<float> fp8_scaling_state() const;
  std::size_t fp8_scaling_floats() const;  // its size, without reading it
  void set_fp8_scaling_state(const std::vector<float>& blocks);
  std::int64_t state_elements() const { return canonical_.total(); }
  // This rank's connection to the others; null in a single-process run.
  Collectives* collectives() const { return comm_; }
  // Data parallel: whether this rank wants the run to stop (a signal), as
  // the next step's vote; the step combines the votes of every rank
  // (stream-ordered, captured with it) and enqueue_stop_readback copies the
  // result next to the loss, so every rank learns of a stop after the same
  // step. Call before the step, outside any capture.
  void stage_stop_vote(bool stop);
  // Data parallel, between steps: every rank takes rank 0's GEMM algorithm
  // choices (Backend::tuning_state), so that the ranks run alike and a run
  // resumed from rank 0's checkpoint rounds as this one did. Nothing may be
  // in flight; a no-op on one rank.
  void adopt_rank0_tuning();
  void enqueue_stop_readback(HostReadback& rb) const;
  static bool stop_voted(HostReadback& rb);

  // rows: batch rows of seq+1 tokens each, row-major; inputs are row[0:S],
  // targets row[1:S+1]. Copied into fixed device buffers, stream-ordered
  // behind the work already enqueued (a graph replay reads them there).
  // With gradient accumulation (UpdateRecipe::accumulation = K) a training
  // step's rows are K micro-batches of shape().batch rows, back to back;
  // one micro-batch's rows are also taken (a forward-only evaluation).
  // Either way micro-batch 0 is selected.
  void set_batch(const std::vector<std::int32_t>& rows);
  // The step's micro-batches (UpdateRecipe::accumulation), and the one the
  // next forward and backward passes read (0-based, < micro_batches()).
  int micro_batches() const { return plan_.update.accumulation; }
  void select_micro_batch(int micro);
  // Accumulating plans, after each micro-batch's backward_pass: micro-batch
  // 0's gradients start the sum, the next ones add to it, and the last
  // one's gradients become the whole step's (then, data parallel, they are
  // exchanged, and under fp16 scanned: the backward passes of an
  // accumulating step do neither, so the non-final micro-batches run no
  // collective). The sum is kept in a gradient-sized accumulator.
  void accumulate_gradients();
  // Whether the step computes the global gradient norm (UpdateRecipe::
  // needs_norm): optimizer_pass then reads it first, and clips by it.
  bool computes_grad_norm() const { return plan_.update.needs_norm(); }
  // The last step's gradient norm (of the unscaled gradient), copied into
  // `rb` in stream order like the loss; grad_norm waits for the copy.
  void enqueue_grad_norm_readback(HostReadback& rb) const;
  static double grad_norm(HostReadback& rb);

  // Fills the per-position losses (under LossImpl::Chunked, computing
  // nothing for backward at the head: backward_pass recomputes it).
  void forward();
  // forward() for a held-out evaluation: it leaves the training state as
  // it was (delayed FP8 scaling's history neither advanced nor recorded).
  void evaluate();
  double loss() const;  // mean loss of the last forward (synchronises)
  // The same loss without waiting: enqueue_loss_readback copies the last
  // forward's per-position losses into `rb` in stream order (outside any
  // capture); mean_loss waits for that copy and averages it. Steps enqueued
  // in between do not change the result.
  void enqueue_loss_readback(HostReadback& rb) const;
  double mean_loss(HostReadback& rb) const;
  std::size_t losses_bytes() const;
  // Gradients of loss() * loss_scale with respect to every parameter. With
  // check_overflow the gradients are scanned for inf/nan on the device and
  // the next optimizer_step divides loss_scale out, or skips the update when
  // the scan found any (fp16 dynamic loss scaling).
  void backward(float loss_scale = 1.0f, bool check_overflow = false);
  void optimizer_step(const AdamWHyper& hp);
  // Whether the last checked backward found inf/nan (synchronises).
  bool overflowed() const;

  // The same step split for whole-step graph capture (backward and
  // optimizer_step above are stage_step + the pass). stage_step copies the
  // values that change from step to step -- the loss scale, AdamW's lr and
  // step count -- into device memory, stream-ordered, where the passes read
  // them when they run; call it before each step, outside any capture. The
  // passes enqueue device work only: no host sync, no allocation, nothing
  // baked into a launch that changes between steps. check_overflow and
  // hp's betas, eps and weight decay are fixed into a capture: a captured
  // step keeps the ones it was captured with.
  void stage_step(float loss_scale, bool check_overflow, const AdamWHyper& hp);
  // update_layers: where the plan's optimizer is FusedPerLayer, also
  // update each layer's parameters as soon as its gradients are final, and
  // leave the optimizer_pass that must follow only the rest to sweep. For
  // whole steps (StepRunner); not for callers that read the gradients, or
  // the parameters they came from, before the optimizer step.
  void backward_pass(bool update_layers = false);
  // forward() for a whole step, after stage_step: under LossImpl::Chunked
  // it also runs the head's backward chunk by chunk (dlogits with the staged
  // loss scale, the head's data and weight gradients), so the next
  // backward_pass starts below the head and the full logits never exist.
  void forward_pass();
  void optimizer_pass();

  // The activation arena's base (ActivationPlan offsets count from it), for
  // the memory timeline's access trace (prof/memory_timeline.h).
  const void* activation_arena() const { return arena_; }
  // The logits of the last step's batch -- its final hidden states through
  // the tied head as it is now, after the step's update -- summarised. Runs
  // the head GEMM again, one logits buffer of rows at a time, and reads each
  // back: it synchronises, so call it between steps (nothing in flight).
  LogitStats logit_stats();

  // Views into the flat blocks, for tests and I/O. Under GradBuffers::Ring a
  // layer's gradient view is its ring slot, which holds the latest layer of
  // that slot's turn.
  Mat param(const ParamSlot& s) const;
  Mat grad(const ParamSlot& s) const;

 private:
  // The master, or its low-precision copy under AMP; the master itself for
  // a weight the plan keeps no copy of (ComputeCopyLayout), which only FP8
  // casts read (as its bf16 values, fp8_weight).
  Mat compute_weight(const ParamSlot& s) const;
  // The tied LM head: the embedding with its padded_vocab() rows (the
  // compute copy, and the gradient), for the three LM-head GEMMs.
  Mat lm_head_weight() const;
  Mat lm_head_grad() const;
  void refresh_compute_weights();
  void run_forward(bool training);
  void forward_layer(int l);
  // forward_layer's halves, marking their ops in the layer's sequence.
  // The attention half returns the FP8 copy its ffn norm made of the gate/up
  // projection's input (Fp8Made::x), for the feed-forward half's GEMM.
  Fp8Made forward_attention_block(int l, OpSequence& ops);
  void forward_ffn_block(int l, OpSequence& ops, Fp8Made gate_up_made);
  // rmsnorm_forward, or under Fp8Linears::norm_casts with linear `kind`'s
  // forward in FP8, its FP8 copy written by the norm (model_fp8.cc).
  Fp8Made norm_forward(LinearKind kind, int l, Mat out, Mat rstd, Mat x, Mat weight);
  // model_loss.cc: the tied LM head and the cross-entropy. loss_forward
  // with head_gradients (Chunked only) also leaves d(final norm) in
  // d_norm_out and the head's weight gradient issued; loss_backward does
  // what the forward left to do.
  void loss_forward(bool head_gradients);
  void loss_backward();
  void chunked_head(bool head_gradients);
  // The logits buffer over all ModelConfig::padded_vocab() columns (its row
  // stride), for the LM-head GEMMs; the loss reads the first vocab_size.
  static Mat padded_logits(Mat logits);
  double mean_of_losses(const void* raw, std::size_t bytes) const;  // of the losses' dtype
  // Side GEMM tickets (Backend::side_gemm) of the weight gradients whose
  // inputs a later layer's backward overwrites: it joins each one first.
  struct WgradTickets {
    std::int64_t gate_up = -1;   // reads d_gate_up (first: the head, reading the logits)
    std::int64_t out_proj = -1;  // reads d_residual_b
    std::int64_t qkv = -1;       // reads d_qkv
  };
  void backward_layer(int l, Mat dres_in, Mat dres_out, WgradTickets& tickets);
  // backward_layer's halves, marking their ops in the layer's sequence;
  // the feed-forward half returns its down projection's weight-gradient
  // ticket, which the attention half's norm backward joins.
  std::int64_t backward_ffn_block(int l, Mat d_out, Mat d_h, WgradTickets& tickets,
                                  OpSequence& ops);
  void backward_attention_block(int l, Mat d_out, Mat d_h, std::int64_t down_ticket,
                                WgradTickets& tickets, OpSequence& ops);
  // The optimizer's step settings: the staged scalars and, under fp16, the
  // overflow flag that skips the update.
  AdamWHyper update_hyper() const;
  // One fused AdamW sweep over `span` of the flat state, writing the compute
  // copy under AMP; beside_backward: Backend::side_adamw_fused, whose ticket
  // it returns (else -1). `span` lies within one ParamLayout span.
  std::int64_t sweep_adamw(ParamSpan span, const AdamWHyper& hp, bool beside_backward);
  // The same over one rank's shard of a bucket (model_parallel.cc).
  std::int64_t sweep_shard(const BucketShard& shard, const AdamWHyper& hp, bool beside_backward);
  // model_parallel.cc, data-parallel runs only. exchange_gradients sums
  // a bucket's gradients over the ranks (into this rank's shard under
  // ZeRO-1) beside the backward pass; update_bucket sweeps this rank's
  // shard and gathers the weights it updated from every rank.
  void exchange_gradients(ParamSpan bucket);
  // The ranks whose gradients exchange_gradients sums (1 in one process):
  // the step's scalars divide it out with the loss scale, where every
  // reader of the gradient (the updates, the norm) already unscales. A sum
  // is what NCCL's symmetric kernels reduce (an average is not, in 2.28);
  // they run a reduce-scatter on a few thread blocks, leaving the SMs to
  // the backward pass beside it.
  int summed_ranks() const;
  // `bytes` of backend memory that the ranks exchange: in the collectives'
  // window where they offer one (in_window set), else an ordinary block.
  void* allocate_exchanged(std::size_t bytes, bool& in_window);
  void release_exchanged(void* block, bool in_window);
  void update_bucket(ParamSpan bucket, const AdamWHyper& hp);
  void parallel_optimizer_pass(const AdamWHyper& hp);
  // The global gradient norm into grad_norm_ and clipping's coefficient
  // into the staged scalars (UpdateRecipe), before any update reads them.
  void compute_grad_norm();
  // The end of a step's gradients, after its backward pass (or the sum of
  // its micro-batches'): data parallel, the exchanges of `buckets` (those
  // not issued beside the backward pass); under fp16, the overflow scan.
  void finish_gradients(const std::vector<ParamSpan>& buckets);
  // Data parallel: fn on this rank's shard of each bucket's gradient, in
  // bucket order (all of it without ZeRO-1).
  void for_each_grad_shard(const std::function<void(Mat)>& fn) const;
  // Data parallel: each bucket's exchange, as the backward pass issues it;
  // an accumulating step issues them all after its last micro-batch.
  bool exchanges_in_backward() const { return comm_ != nullptr && !plan_.update.accumulates(); }
  // The per-position losses the current micro-batch's forward writes, and
  // the whole step's (all micro-batches), which the loss readback reads.
  Mat micro_losses() const;
  Mat step_losses() const;
  // sweep_shard's one AdamW call over `shard`, all of it in hp's decay
  // group and writing the compute copy or not (sweep_shard cuts a shard
  // into runs of one group each).
  std::int64_t sweep_groups(const BucketShard& shard, const AdamWHyper& hp, bool beside_backward,
                            bool with_copy);
  // Under fp16: the overflow scan of this rank's reduced gradients, then
  // the flag combined over the ranks, so every rank skips together.
  void parallel_overflow_check();
  // The per-position losses summed over the ranks (mean_loss divides).
  void reduce_losses(bool beside_backward);
  // A block's bytes in layout_, complete: the master weights gathered when
  // they are stale (ZeRO-1 under AMP keeps only this rank's shards fresh),
  // the moments gathered from their shards. May use the gradient block as
  // scratch (zeroed again after), so only between steps.
  std::vector<char> full_block(StateBlock block) const;
  void gather_into_grads(const void* shards) const;
  // A projection's weight as row blocks (q|k|v, gate|up): the unfused
  // levels run one GEMM per block.
  struct RowParts {
    int count = 0;
    int starts[3] = {};
    int widths[3] = {};
  };
  RowParts qkv_parts() const;
  RowParts gate_up_parts() const;
  void qkv_forward(int l, Fp8Made made);
  // Both return the ticket of their last weight-gradient GEMM.
  std::int64_t qkv_backward(int l, Mat dn1, Fp8Made made);
  // The backward's recompute of a norm feeding linear `kind` (model_backward.cc).
  Fp8Made recompute_norm(LinearKind kind, int l, Mat out, Mat x, Mat weight, Mat rstd);
  void ffn_up_forward(int l, Fp8Made made);
  std::int64_t ffn_up_backward(int l, Mat dn2, Fp8Made made);
  // Their shared body, and the out-projection's (Fused, no parts):
  // d(in) = d(out) · W and d(W) = d(out)ᵀ · in (on the side branch), one
  // GEMM each under GemmGrouping::Fused, else per part; wgrad_op / dgrad_op
  // name the two marked ops.
  std::int64_t projection_backward(LinearKind kind, int l, Mat d_in, Mat in, Mat d_out,
                                   const ParamSlot& slot, GemmGrouping grouping,
                                   const RowParts& parts, const char* wgrad_op,
                                   const char* dgrad_op, Fp8Made made = {});
  // model_fp8.cc: the linear GEMMs under --amp-dtype float8, each in FP8
  // where StepPlan::fp8 says, else bf16 as without it.
  // y = x W^T (+ *residual where given), from x's and W's FP8 copies, made
  // here (x's unless `made` has it) with their scales kept for the backward.
  void fp8_forward(LinearKind kind, int l, Mat y, Mat x, Mat w, const Mat* residual, Fp8Made made);
  // At the start of each forward pass: how this pass's FP8 tensors find
  // their scales (fp8_fresh_), and under delayed scaling, before a pass
  // that records amaxes (any but evaluate()'s) with a history, the scales
  // updated from it.
  void begin_fp8_pass(bool records);
  // Data parallel under delayed scaling, at the end of each pass that
  // records amaxes: every block's amax becomes the largest over the ranks,
  // so all ranks keep one history (the global batch's) and scale alike,
  // and a checkpoint's (rank 0's) is every rank's.
  void reduce_fp8_amaxes();
  bool reduces_fp8_amaxes() const {
    return delayed_fp8() && comm_ != nullptr && comm_->world() > 1;
  }
  bool delayed_fp8() const { return acts_.fp8.used() && plan_.fp8.scaling == Fp8Scaling::Delayed; }
  // y = x W^T, in FP8 or bf16.
  void linear_forward(LinearKind kind, int l, Mat y, Mat x, Mat w, Fp8Made made = {});
  // y = x W^T + residual: the GEMM's add (GemmEpilogue::Residual), in FP8
  // too (LinearOps::gemm_fp8_add).
  void linear_forward_add(LinearKind kind, int l, Mat y, Mat x, Mat w, Mat residual,
                          Fp8Made made = {});
  // Fp8Linears::swiglu_casts as this plan runs it: the SwiGLU is its own
  // kernel (SwigluImpl::Fused), which writes the codes its FP8 readers take.
  bool swiglu_writes_fp8() const {
    return plan_.fp8.swiglu_casts && plan_.ops.swiglu == SwigluImpl::Fused;
  }
  // The SwiGLU passes under swiglu_writes_fp8 (model_fp8.cc): hidden and
  // its codes for the down projection's FP8 forward (Fp8Made::x) or, in the
  // backward's recompute, its weight gradient (Fp8Made::x_t); the gate/up
  // gradient and its codes for that linear's FP8 backward (Fp8Made::dy).
  // Each returns what it made; nothing where no FP8 GEMM reads it, and the
  // caller runs the plain SwiGLU op then.
  Fp8Made swiglu_forward_for_fp8(int l, Mat hidden, Mat gate, Mat up, bool recompute);
  Fp8Made swiglu_backward_for_fp8(int l, Mat d_gate_up, Mat d_hidden, Mat gate, Mat up);
  // The scale of a linear's input: kept from its FP8 forward, else fresh.
  Fp8ScaleFrom fp8_input_scale(LinearKind kind) const;
  Fp8Tensor fp8_weight(Fp8Tensor q, const Mat& w) const;
  // The FP8 copies a linear's backward GEMMs read: dy's (either copy), W^T
  // and x^T, each made only for a GEMM in FP8. Issued before the fork, as
  // the weight gradient on the side branch reads them.
  struct Fp8Grads {
    Fp8Tensor dy, w_t, x_t;
  };
  Fp8Grads fp8_backward_operands(LinearKind kind, int l, Mat d_out, Mat in, Mat w,
                                 Fp8Made made = {});
  // d_in = d_out W, and dW = d_out^T in on the side branch (its ticket).
  void linear_dgrad(LinearKind kind, const Fp8Grads& q, Mat d_in, Mat d_out, Mat w);
  std::int64_t linear_wgrad(LinearKind kind, const Fp8Grads& q, Mat dw, Mat d_out, Mat in);
  // d_in = sum over parts of d_out[:, part] · w[part, :], one GEMM per part
  // (unfused levels); summed in fp32 under AMP (ActivationPlan::d_norm_sum).
  void separate_dgrad(Mat d_in, Mat d_out, Mat w, const RowParts& parts);
  bool fused_norm() const { return plan_.ops.norm == NormImpl::Fused; }
  // GemmEpilogue::Residual: the out- and down-projections add into the
  // residual stream, and every forward norm only normalises.
  bool adds_in_gemms() const { return plan_.ops.epilogue == GemmEpilogue::Residual; }
  bool recompute_norms() const { return recomputes_norms(plan_.ops.activations); }
  bool recompute_swiglu() const { return recomputes_swiglu(plan_.ops.activations); }
  // d_sum = d_above + the RMSNorm's input gradient (and its weight
  // gradient), after joining the side GEMM `reader` of d_sum; marked as
  // attn_/ffn_residual_norm (fused) or attn_/ffn_norm then _residual.
  enum class NormHalf { Attn, Ffn };
  void norm_residual_backward(Mat d_sum, Mat d_weight, Mat d_norm, Mat x, Mat weight, Mat rstd,
                              Mat d_above, std::int64_t reader, NormHalf half);

  ModelConfig cfg_;
  StepPlan plan_;
  BatchShape shape_;
  Backend& backend_;
  Collectives* comm_ = nullptr;  // data parallel: the other ranks
  ParamLayout layout_;
  GradLayout grad_layout_;
  ComputeCopyLayout compute_copy_;  // where compute_params_ holds each kept slot
  ParamLayout canonical_;           // state_layout(): single rank, vocab_size rows
  // layout_.non_layer_spans(), kept so that no step allocates for them.
  std::vector<ParamSpan> non_layer_spans_;
  ActivationPlan acts_;

  // Master weights, gradients and both AdamW moments: four equal blocks of
  // one allocation (state_), so the optimizer state is one region to sweep,
  // capture or profile.
  void* state_ = nullptr;
  void* params_ = nullptr;  // master weights
  void* grads_ = nullptr;   // master dtype
  void* adam_m_ = nullptr;  // DataParallel::moment_elements long (a shard per bucket)
  void* adam_v_ = nullptr;
  // ZeRO-1 under AMP: each rank gathers only the compute copy, so the
  // master weights of other ranks' shards are stale after a step.
  mutable bool master_stale_ = false;
  void* compute_params_ = nullptr;  // low-precision copy under AMP (compute_copy_), else null
  // Whether state_ and compute_params_ lie in the collectives' window
  // (allocate_exchanged; released there).
  bool state_in_window_ = false;
  bool compute_params_in_window_ = false;
  bool layers_updated_ = false;  // by the last backward_pass, for optimizer_pass
  // GradBuffers::Ring: per slot, the ticket of the last sweep that reads it
  // (Backend::side_adamw_fused), joined before the slot's next layer writes
  // it; -1: none in this backward pass.
  std::array<std::int64_t, 2> slot_sweeps_{-1, -1};
  bool head_backward_done_ = false;  // by forward_pass (Chunked), for backward_pass
  // The side GEMM ticket of the head's last weight-gradient GEMM, the
  // logits' last reader: the layers' backward joins it before it writes the
  // scratch laid over them (ActivationPlan::scratch_over_logits).
  std::int64_t head_wgrad_ticket_ = -1;
  void* arena_ = nullptr;
  // Every micro-batch's [inputs | targets] block, back to back (device).
  std::int32_t* token_blocks_ = nullptr;
  std::int32_t* tokens_ = nullptr;   // [B*S] the selected micro-batch's inputs
  std::int32_t* targets_ = nullptr;  // [B*S] its targets: tokens_ + B*S, the same block
  int micro_ = 0;                    // the selected micro-batch
  // Accumulation: the step's losses, [K * B * S] in the stats dtype (one
  // batch's live in the arena otherwise), and the gradient sum.
  void* step_losses_ = nullptr;
  void* grad_accum_ = nullptr;
  // The gradient norm: its sum of squares with Backend::sum_squares's
  // scratch after it, and the norm (device).
  double* norm_acc_ = nullptr;
  float* grad_norm_ = nullptr;
  std::int32_t* overflow_flag_ = nullptr;  // set by flag_nonfinite (device)
  std::int32_t* stop_vote_ = nullptr;      // data parallel: stage_stop_vote (device)
  StepScalars* step_scalars_ = nullptr;    // the staged per-step values (device)
  float* fp8_amaxes_ = nullptr;            // reduce_fp8_amaxes: every block's amax, packed (device)
  float loss_scale_ = 1.0f;                // staged by the last stage_step
  bool check_overflow_ = false;            // whether backward_pass scans
  // The scaling of the FP8 tensors the current pass quantises afresh
  // (begin_fp8_pass); the backward's transposed copies of an FP8 forward's
  // operands keep its scale whatever this is.
  Fp8ScaleFrom fp8_fresh_ = Fp8ScaleFrom::Amax;
  bool fp8_history_warm_ = false;  // delayed scaling: a training pass has recorded amaxes
  AdamWHyper hyper_;               // staged by the last stage_step
};

}  // namespace tinyllama
