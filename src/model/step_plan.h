#pragma once
// One resolved plan per run (DESIGN §2-3): which implementation each op of
// the step uses, how the step executes (eager or one captured graph, with or
// without parallel branches), whether the loss is scaled, and the backend's
// workspaces. resolve_plan() is the only place that decides any of it, from
// the level preset and the single overrides (OpChoices), the precision, what
// the device can do (DeviceCaps) and the shapes. Every consumer -- the
// activation plan, the passes, the cost model, the backends, the step runner,
// the memory check, the reports -- reads the plan and decides nothing.
//
// A choice that cannot run on this device or at these shapes falls back in
// resolve_plan, and the plan keeps a one-line reason for it (Fallback), so
// the run header, the summary and --json can say what changed and why.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/data_parallel.h"
#include "model/faults.h"
#include "model/fp8_plan.h"
#include "model/kernel_choices.h"

namespace tinyllama {

enum class DeviceKind { Cpu, Cuda };

// --- the implementation choices, one enum per op ------------------------------
// A choice with a single value names the op's only implementation today; the
// next levels (v3, v4) add theirs beside it.

// The Q/K/V and gate/up projections: one GEMM on the fused weight, or one per
// part on row slices of it (the same parameters either way).
enum class GemmGrouping { Separate, Fused };
// Materialized: S x S probabilities stored (v1). Flash: our own kernels,
// P recomputed from lse. Cudnn: cuDNN's fused SDPA. CudnnFlash: cuDNN's
// forward and our flash backward, which reads the forward's out and lse as
// cuDNN writes them (the same [B*H, S] natural-log lse: the two share the
// contract). Auto is a request only: resolve_plan times flash and cuDNN at
// the run's shapes, each pass apart, and keeps the fastest of flash, cudnn
// and cudnn+flash, so a resolved plan never holds it.
enum class AttentionImpl { Materialized, Flash, Cudnn, CudnnFlash, Auto };
// The implementation each pass runs: CudnnFlash's forward is Cudnn, its
// backward Flash; every other choice runs both passes.
AttentionImpl forward_attention(AttentionImpl v);
AttentionImpl backward_attention(AttentionImpl v);
// silu(gate) * up: one kernel, or silu then mul through a stored silu(gate).
// Gemm: the SwiGLU inside the GEMMs beside it (forward: the gate/up GEMM's
// epilogue writes silu(g) * u beside g and u; backward: the down
// projection's data-gradient GEMM's epilogue turns d_hidden into d_gate and
// d_up without storing it). Backend::gemm_swiglu_forward/backward; the CPU
// composes them from the GEMM and the fused kernels. Needs the fused gate/up
// GEMM; on CUDA a Hopper kernel (sm_90a, bf16/fp16, F a multiple of 64),
// else fused with a note.
enum class SwigluImpl { Separate, Fused, Gemm };
// Plain: the residual add and the RMSNorm as separate ops. Fused: one kernel
// adds the sublayer's output into the residual stream and normalises the
// sum (across the layer boundary too: a block's last add feeds the next
// block's first norm, or the final norm); backward, one kernel writes the
// norm's input gradient plus the residual gradient.
enum class NormImpl { Plain, Fused };
// Separate: a rotation pass over q and k after the QKV GEMM, and one over
// dq and dk after attention's backward. Fused: the backward's rotation
// happens inside attention's backward (StepOps::attention_rope_backward; on
// CUDA, in the flash kernels' epilogues, on the fp32 accumulators before
// rounding). The forward keeps its one pass over the QKV GEMM's q|k
// columns: rotating inside the flash forward
// (ExerciseOps::attention_rope_forward) measured slower at every shape but the workshop's
// (docs/log/2026-11-25.md). Only with our flash attention: resolve_plan turns it back to Separate
// for the others.
enum class RopeImpl { Separate, Fused };
// The embedding gradient (the scatter-add of d(embedding output) into the
// table rows). Sorted: the positions sorted by token id, then equal-sized
// chunks of them summed per run of equal ids, so a skewed token distribution
// (byte-level text) costs what a uniform one does. Scan: the block of a
// token's first position sums all of that token's rows, which serialises a
// frequent token on one block; kept beside it for the kernel bench. Both sum
// in a fixed order. No flag: every level takes Sorted.
enum class EmbeddingGradImpl { Scan, Sorted };
// FullLogits: the head GEMM over all rows, cross-entropy forward, and in
// backward its gradient over the stored logits. Chunked: per chunk of rows
// (StepPlan::loss_chunk_rows), the head GEMM, one kernel for the loss and
// dlogits, and the head's two gradient GEMMs (the weight gradient summed
// over chunks): the full logits never exist.
enum class LossImpl { FullLogits, Chunked };
// None: GEMMs write their output and the residual adds are separate ops (or
// the fused norm's add half). Residual: the out-projection and the
// down-projection GEMMs accumulate into the residual stream through
// cuBLASLt's beta = 1 (D = A*B + C, one rounding of the sum), so the norms
// that follow only normalise. Backward is unchanged: the residual gradient
// sums stay in the norms' backward kernels.
enum class GemmEpilogue { None, Residual };
enum class OptimizerImpl {
  PerTensor,      // one AdamW launch per parameter tensor, then a convert pass (AMP)
  Fused,          // one sweep over the flat state, writing the AMP copy as it goes
  FusedPerLayer,  // Fused, with each layer's sweep beside the backward pass
};
enum class Execution { Eager, Graph };  // Graph: one captured step replayed
// Stored: every layer keeps its two normalised inputs (the QKV and gate/up
// GEMMs' inputs) for the weight gradients. RecomputeNorms: one buffer each,
// shared by the layers; the backward pass remakes a layer's from its saved
// input and rstd (Backend::rmsnorm_apply), bit-identical, before the GEMMs
// that read it: 2 x [tokens, D] per layer less to keep, one cheap pass more.
// RecomputeNormsSwiglu ("recompute"): RecomputeNorms, and the SwiGLU output
// h = silu(g) * u (the down projection's input) in one shared buffer too;
// the backward pass remakes a layer's from its saved gate/up output with the
// forward's own op (swiglu_forward, or mul of the saved silu(g) and u under
// SwigluImpl::Separate), bit-identical, before the down projection's weight
// gradient reads it: [tokens, F] per layer less, one more elementwise pass.
// Auto is a request only (v3, v4): resolve_plan takes RecomputeNormsSwiglu
// where the hidden size is at least kRecomputeFromHidden and the step has at
// least kRecomputeFromTokenHidden tokens x hidden, RecomputeNorms elsewhere
// from kRecomputeNormsFromTokenHidden tokens x hidden, Stored below. The
// extra passes are elementwise (bytes ~ tokens x (D + F)) beside GEMMs
// whose work grows with D^2: measured on the H100 they cost 1.7 % of the
// 1 B step (D 2048) for 6.5 GB less, but 4.5 % at the GPT-2 size (D 768)
// and 7 % at D 512, B32 S1024, where the SwiGLU's pass is most of it. The
// norms alone cost 0.3-0.8 % on an H200 (D 1024 B16 S128, D 1152 B8 S512,
// D 512 B32 S1024 in FP8) for 2 x [tokens, D] per layer; a smaller step
// is launch-bound, each extra pass costs its launch, and keeps its norms.
// An fp32 step (no AMP) recomputes both from kRecomputeFp32FromTokenHidden
// at any hidden size: its GEMMs run on the CUDA cores, about 5x the 16-bit
// step's time, and its activations take twice the bytes. Measured on an
// H200: +2.5 % at the workshop's B8 S128 (88 MB less, below the compiled
// peer's peak), +0.6 % at D 768 B8 S1024 (1.06 GB less).
enum class ActivationsImpl { Stored, RecomputeNorms, RecomputeNormsSwiglu, Auto };
inline constexpr int kRecomputeFromHidden = 2048;
inline constexpr std::int64_t kRecomputeFromTokenHidden = std::int64_t{1} << 22;
inline constexpr std::int64_t kRecomputeNormsFromTokenHidden = std::int64_t{1} << 20;
inline constexpr std::int64_t kRecomputeFp32FromTokenHidden = std::int64_t{1} << 19;
// What an ActivationsImpl remakes in the backward pass.
inline bool recomputes_norms(ActivationsImpl a) {
  return a == ActivationsImpl::RecomputeNorms || a == ActivationsImpl::RecomputeNormsSwiglu;
}
inline bool recomputes_swiglu(ActivationsImpl a) {
  return a == ActivationsImpl::RecomputeNormsSwiglu;
}
// Where the layers' gradients live. Full: every layer its own slice of one
// flat gradient block, so the whole gradient exists after the backward pass.
// Ring: two layer-sized slots that the layers take turns in (layer l writes
// slot l % 2); a layer's gradient lives only until its sweep beside the
// backward pass (OptimizerImpl::FusedPerLayer) has read it, which saves
// (L - 2) layers of gradient. The embedding's and the final norm's
// gradients keep their own storage either way.
enum class GradBuffers { Full, Ring };
enum class LossScaling { None, Dynamic };
// How the step's own kernels are launched (cuBLASLt's GEMMs and cuDNN's
// kernels are launched by their libraries, plainly). Plain: each waits in
// its stream for the whole kernel before it. Pdl: programmatic dependent
// launch (sm_90+): a kernel may be scheduled as soon as every block of the
// one before it has started, and waits on the device, in its first
// statement, for that one to complete (device/cuda_launch.cuh), so the
// launch latency of a launch-bound step hides under the kernel before.
// The same kernels compute the same bits either way. Plain on the CPU and
// on devices below sm_90, with a reason. Auto (v4): pdl under mixed
// precision, plain in fp32, where it measured slower (docs/PERFORMANCE.md).
enum class KernelLaunch { Plain, Pdl, Auto };

struct OpChoices {
  GemmGrouping qkv_gemm = GemmGrouping::Fused;
  GemmGrouping gate_up_gemm = GemmGrouping::Fused;
  AttentionImpl attention = AttentionImpl::Flash;
  SwigluImpl swiglu = SwigluImpl::Fused;
  NormImpl norm = NormImpl::Plain;
  RopeImpl rope = RopeImpl::Separate;
  EmbeddingGradImpl embedding_grad = EmbeddingGradImpl::Sorted;
  LossImpl loss = LossImpl::FullLogits;
  GemmEpilogue epilogue = GemmEpilogue::None;
  OptimizerImpl optimizer = OptimizerImpl::FusedPerLayer;
  Execution execution = Execution::Graph;
  ActivationsImpl activations = ActivationsImpl::Stored;
  GradBuffers grad_buffers = GradBuffers::Full;
  KernelLaunch kernel_launch = KernelLaunch::Plain;
};
// Written out: the CUDA sources that include this header compile as C++17.
bool operator==(const OpChoices& a, const OpChoices& b);
inline bool operator!=(const OpChoices& a, const OpChoices& b) {
  return !(a == b);
}

// Names as the reports print them: "fused", "flash", "fused_per_layer", ...
const char* impl_name(GemmGrouping v);
const char* impl_name(AttentionImpl v);
const char* impl_name(SwigluImpl v);
const char* impl_name(NormImpl v);
const char* impl_name(RopeImpl v);
const char* impl_name(EmbeddingGradImpl v);
const char* impl_name(LossImpl v);
const char* impl_name(GemmEpilogue v);
const char* impl_name(OptimizerImpl v);
const char* impl_name(Execution v);
const char* impl_name(ActivationsImpl v);
const char* impl_name(GradBuffers v);
const char* impl_name(LossScaling v);
const char* impl_name(KernelLaunch v);

// The choices of a level preset, in order: {"qkv_gemm", "fused"}, ...
struct NamedChoice {
  const char* op;
  const char* impl;
};
std::vector<NamedChoice> named_choices(const OpChoices& ops);

// --- levels -------------------------------------------------------------------

// The preset used when --version is not given. Kept in one place so that it
// moves to the fastest level as soon as that level is implemented.
inline constexpr const char* kDefaultLevel = "v4";
// Every implemented level, in ladder order.
std::vector<std::string> implemented_levels();
// The choices of a level (DESIGN §2). Throws UsageError naming the allowed
// levels for an unknown or unimplemented name.
OpChoices level_preset(const std::string& name);

// --- what the device can do ----------------------------------------------------

// A backend workspace planned before step 1 (GEMM workspace, attention
// scratch, ...): the memory check and the reported peak count it.
struct Workspace {
  std::string name;
  std::int64_t bytes = 0;
};

struct StepPlan;

// One layer's attention, forward and backward, timed on the device, and
// the workspace the implementation asks for (its forward's alone, and the
// two passes'; the step keeps one block of the larger).
struct AttentionTiming {
  double forward_ms = 0;
  double backward_ms = 0;
  std::int64_t forward_workspace_bytes = 0;
  std::int64_t workspace_bytes = 0;
  double total_ms() const { return forward_ms + backward_ms; }
};

// What the device can do: facts, given to resolve_plan as data (the plan
// never calls into a backend). The static ones come from the backend's
// caps(); the ones that depend on the run (whether cuDNN takes this
// attention, attention=auto's timings) are measured by the caller before the
// plan is resolved (train/backend_factory.h: run_caps), and a test sets
// them by hand.
struct DeviceCaps {
  DeviceKind kind = DeviceKind::Cpu;
  bool graphs = false;             // can capture a whole step and replay it
  bool parallel_branches = false;  // work beside the main stream inside a capture
  // head_dims the flash kernels are built for; empty: any head_dim.
  std::vector<int> flash_head_dims;
  // "" when the device takes programmatic dependent launches
  // (KernelLaunch::Pdl), else why not.
  std::string no_programmatic_launch = "the cpu backend launches no kernels";
  // "" when the build has sm_90a code and the device is a 9.0 one (the
  // Hopper flash kernels and the SwiGLU GEMM run), else why not.
  std::string no_hopper_kernels = "the cpu backend has none";
  // "" when the device has FP8 tensor cores (compute capability 8.9 or
  // newer) for --amp-dtype float8, else why not.
  std::string no_fp8_gemm = "the cpu backend has none";
  int sm_count = 0;  // 0: unknown (no kernel family is sized by it)
  // The one-launch flash backward may be the default where it measured
  // faster (TINYLLAMA_FLASH_ONE_LAUNCH, on unless set off).
  bool flash_one_launch = true;
  // The chunked loss may stage long rows in shared memory
  // (TINYLLAMA_CE_STAGED_ROWS, on unless set off).
  bool loss_staged_rows = true;
  // attention=auto can time the candidates on this device.
  bool times_attention = false;

  // --- measured for the run, before resolve_plan ----------------------------
  // "" when cuDNN's SDPA runs this model's attention at the run's shapes and
  // precision, else why not; unset: the device has no cuDNN (or nobody asked).
  std::optional<std::string> cudnn_attention;
  // attention=auto's timings of one layer, forward and backward, at the run's
  // shapes (attention_timings_wanted says when the caller takes them).
  std::optional<AttentionTiming> flash_timing, cudnn_timing;

  static DeviceCaps cpu();  // the reference backend: eager, any head_dim
};

// --- how gradients become an update ---------------------------------------------

// The parts of the training recipe that change what a step computes
// (docs/TRAINING.md): the passes and the optimizer read them from the plan.
// The defaults are the workshop's step: one batch, no clipping, no norm,
// weight decay on every tensor.
struct UpdateRecipe {
  // Micro-batches of the batch shape whose gradients are summed into one
  // optimizer step (their mean loss's gradient: each micro-batch's loss
  // gradient is divided by every micro-batch's tokens).
  int accumulation = 1;
  // > 0: the global L2 norm of the (unscaled) gradient is clipped to this,
  // torch.nn.utils.clip_grad_norm_'s way.
  double clip_norm = 0;
  // Compute and report the gradient norm without clipping (--log-grad-norm).
  bool report_norm = false;
  // Weight decay on the matrices only (the embedding and the linear
  // weights), not on the RMSNorm weights; else on every tensor.
  bool decay_matrices_only = false;

  bool needs_norm() const { return clip_norm > 0 || report_norm; }
  bool accumulates() const { return accumulation > 1; }
};

// --- the plan -------------------------------------------------------------------

// A choice that could not run as asked.
struct Fallback {
  std::string op;      // "attention"
  std::string wanted;  // "flash"
  std::string using_;  // "materialized"
  std::string
      reason;  // "the CUDA flash kernels are built for head_dim 32, 64, 128 (this model: 96)"
  std::string describe() const;  // "attention flash -> materialized: <reason>"
};

// How attention=auto decided: each candidate's time at the run's shapes, or
// why it was not a candidate.
struct AttentionAuto {
  bool requested = false;
  bool flash_timed = false, cudnn_timed = false;
  AttentionTiming flash, cudnn;
  std::vector<std::string> notes;  // "cudnn: this build has no cuDNN"
  // The checkpoint the choice was taken from (--resume), not timed again;
  // "" when this run chose.
  std::string reused_from;
  // "auto chose cudnn per layer: cudnn 0.412 ms (fwd ..., bwd ...), flash 0.631 ms (...)"
  std::string describe(AttentionImpl chosen) const;
};

// attention=auto's decision as a checkpoint keeps it: the implementation
// chosen and what its timing saw. A resumed run takes it instead of timing
// again, so that it runs the kernels the uninterrupted run ran (flash and
// cuDNN may rank differently from one timing to the next when their times
// are close, and they round differently).
struct SavedAttentionChoice {
  AttentionImpl chosen = AttentionImpl::Flash;
  AttentionAuto how;  // the times and notes of the run that chose
  std::string from;   // where it was read: the checkpoint's path
};

// What a run asks for: a level preset with single choices changed, and a precision.
struct PlanRequest {
  std::string level = kDefaultLevel;
  OpChoices ops = level_preset(kDefaultLevel);
  Precision precision = Precision::fp32();
  // LossImpl::Chunked's rows per chunk; 0: loss_chunk_rows() decides.
  std::int64_t loss_chunk_rows = 0;
  // attention=auto on resume: the choice the checkpoint holds, taken
  // untimed when it can still run here (else chosen again, with a note).
  std::optional<SavedAttentionChoice> saved_attention;
  // Who reads the whole gradient after a step ("--dump-dir writes step 1's
  // gradients"); "" when nothing does. GradBuffers::Ring keeps only two
  // layers' gradients, so such a run falls back to Full with this reason.
  std::string whole_gradient_reader;
  // Who reads the final norm's output after a step ("--log-logit-stats");
  // "" when nothing does: it then lies under the backward scratch with the
  // logits (StepPlan::keeps_final_norm).
  std::string final_norm_reader;
  UpdateRecipe update;
  // Kernel families asked for instead of the defaults (the kernel bench, the tests).
  KernelPins kernel_pins;
  // --amp-dtype float8: which linear GEMMs (--fp8-gemms).
  Fp8Choice fp8_gemms = Fp8Choice::Auto;
  Fp8Scaling fp8_scaling = Fp8Scaling::Delayed;  // --fp8-scaling
  // The run is data parallel (--gpus): the FP8 master-weight casts are
  // left out, since ZeRO-1 gathers the bf16 copies.
  bool data_parallel = false;
};

struct StepPlan {
  std::string level;  // the preset the choices started from
  DeviceKind device = DeviceKind::Cpu;
  Precision precision;
  // Under --amp-dtype float8: the linear GEMMs that run in FP8 (all false
  // otherwise, or where the device has no FP8 tensor cores: a Fallback).
  Fp8Linears fp8;
  OpChoices ops;  // resolved: each one runs on this device at these shapes
  LossScaling loss_scaling = LossScaling::None;
  // The weight-gradient GEMMs, and FusedPerLayer's sweeps, on branches of
  // the captured graph beside the main stream (only under Execution::Graph).
  bool parallel_branches = false;
  std::vector<Fallback> fallbacks;
  std::vector<Workspace> workspaces;
  AttentionAuto attention_auto;  // requested = false unless attention=auto
  // activations=auto: what it chose and why; "" when not requested.
  std::string activations_auto;
  // kernel_launch=auto: the same.
  std::string kernel_launch_auto;
  // The debugging exercise's faults (model/faults.h), set by resolve_run from
  // --inject; the passes read naive_swiglu.
  InjectedFaults faults;
  // LossImpl::Chunked: rows per chunk of the loss (the last may be shorter).
  std::int64_t loss_chunk_rows = 0;
  // Data parallel over ranks (--gpus, or a launcher's environment): set by
  // the front end after resolve_plan; every rank resolves the same plan.
  DataParallel parallel;
  // Accumulation, clipping, the gradient norm and the decay groups.
  UpdateRecipe update;
  // The kernel families inside the ops (flash attention's, the SwiGLU GEMM's).
  KernelChoices kernels;
  // The activation arena lays the scratch that only the layers' backward
  // touches over the LM head's logits: the head is done with them (its
  // weight gradient joined) before the layers' backward first writes there
  // (ActivationPlan). Off only to compare the two layouts (tests).
  bool scratch_over_logits = true;
  // The final norm's output keeps bytes of its own, because something
  // reads it after the step (PlanRequest::final_norm_reader); else it lies
  // under that scratch too, dead once the head's weight gradient is joined.
  bool keeps_final_norm = false;

  bool captured() const { return ops.execution == Execution::Graph; }
  bool updates_layers_in_backward() const { return ops.optimizer == OptimizerImpl::FusedPerLayer; }
  bool grad_ring() const { return ops.grad_buffers == GradBuffers::Ring; }
  std::int64_t workspace_bytes() const;
  // One line: "qkv_gemm fused | attention flash | ... | graph | loss scaling none".
  std::string describe() const;
};

// The one function that decides. Throws UsageError for a request no
// fallback can serve (there is none today: every op has a portable choice).
// plan.workspaces is left empty: the backend sizes them for the resolved
// plan (train/backend_factory.h: plan_for_run fills them).
StepPlan resolve_plan(const PlanRequest& request, const DeviceCaps& caps, const ModelConfig& cfg,
                      BatchShape shape);

// Whether resolve_plan would time attention=auto's candidates for this
// request: auto asked, no saved choice that can still run, both flash and
// cuDNN run here (caps.cudnn_attention measured), and the device can time.
// The caller then fills caps.flash_timing and caps.cudnn_timing.
bool attention_timings_wanted(const PlanRequest& request, const DeviceCaps& caps,
                              const ModelConfig& cfg);

// GradBuffers::Ring -> Full with `reason`, recorded as a Fallback; nothing
// when the plan is Full already. For what is known only after resolve_plan
// (a data-parallel run's all-reduce over the flat gradient block).
void fall_back_to_full_gradients(StepPlan& plan, std::string reason);

// The preset's choices with one op changed to each of its other
// implementations, one OpChoices per change: a level is tested as its
// preset and each single change (not the product of every choice).
std::vector<OpChoices> single_changes(const OpChoices& preset);

// The plan a test or tool gets for a level on a device, with no overrides.
StepPlan plan_for_level(const std::string& level, Precision precision, const DeviceCaps& caps,
                        const ModelConfig& cfg, BatchShape shape);
// The same for choices of one's own (tests of a single change).
StepPlan plan_for_choices(const OpChoices& ops, Precision precision, const DeviceCaps& caps,
                          const ModelConfig& cfg, BatchShape shape);

// LossImpl::Chunked's rows per chunk: the fewest equal chunks (multiples of
// 128 rows) whose logits stay within 512 MiB each, and two at least for
// more than 256 MiB of logits -- one chunk when all of them fit in 256.
// Fewer chunks keep the head's GEMMs large and the weight
// gradient's accumulation passes few (each rereads and rewrites V x D fp32).
std::int64_t loss_chunk_rows(const ModelConfig& cfg, BatchShape shape, Precision precision);

// "fp32", "fp64", "amp_bfloat16", "amp_float16" or "amp_float8": a
// precision in one word.
std::string precision_name(Precision precision);
// --amp-dtype's value for a mixed precision ("bfloat16", "float16",
// "float8"); "" for fp32 and fp64.
std::string amp_dtype_name(Precision precision);
const char* device_name(DeviceKind device);

}  // namespace tinyllama
