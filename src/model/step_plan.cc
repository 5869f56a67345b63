#include "model/step_plan.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "core/errors.h"
#include "model/plan_choices.h"

namespace tinyllama {
namespace {

// Every implementation of each op, for naming and for single_changes().
constexpr GemmGrouping kGroupings[] = {GemmGrouping::Separate, GemmGrouping::Fused};
// Auto is a way to choose among these, and CudnnFlash pairs two of them
// (their own tests cover it), not an implementation to test alone.
constexpr AttentionImpl kAttentions[] = {AttentionImpl::Materialized, AttentionImpl::Flash,
                                         AttentionImpl::Cudnn};
constexpr SwigluImpl kSwiglus[] = {SwigluImpl::Separate, SwigluImpl::Fused, SwigluImpl::Gemm};
constexpr NormImpl kNorms[] = {NormImpl::Plain, NormImpl::Fused};
constexpr RopeImpl kRopes[] = {RopeImpl::Separate, RopeImpl::Fused};
constexpr EmbeddingGradImpl kEmbeddingGrads[] = {EmbeddingGradImpl::Scan,
                                                 EmbeddingGradImpl::Sorted};
constexpr LossImpl kLosses[] = {LossImpl::FullLogits, LossImpl::Chunked};
constexpr GemmEpilogue kEpilogues[] = {GemmEpilogue::None, GemmEpilogue::Residual};
constexpr OptimizerImpl kOptimizers[] = {OptimizerImpl::PerTensor, OptimizerImpl::Fused,
                                         OptimizerImpl::FusedPerLayer};
constexpr Execution kExecutions[] = {Execution::Eager, Execution::Graph};
constexpr ActivationsImpl kActivations[] = {ActivationsImpl::Stored,
                                            ActivationsImpl::RecomputeNorms,
                                            ActivationsImpl::RecomputeNormsSwiglu};
constexpr KernelLaunch kKernelLaunches[] = {KernelLaunch::Plain, KernelLaunch::Pdl};

}  // namespace

const char* impl_name(GemmGrouping v) {
  return v == GemmGrouping::Fused ? "fused" : "separate";
}
const char* impl_name(AttentionImpl v) {
  switch (v) {
    case AttentionImpl::Materialized:
      return "materialized";
    case AttentionImpl::Flash:
      return "flash";
    case AttentionImpl::Cudnn:
      return "cudnn";
    case AttentionImpl::CudnnFlash:
      return "cudnn+flash";
    case AttentionImpl::Auto:
      return "auto";
  }
  return "?";
}

const char* impl_name(SwigluImpl v) {
  switch (v) {
    case SwigluImpl::Separate:
      return "separate";
    case SwigluImpl::Fused:
      return "fused";
    case SwigluImpl::Gemm:
      return "gemm";
  }
  return "?";
}
const char* impl_name(NormImpl v) {
  return v == NormImpl::Fused ? "fused" : "plain";
}
const char* impl_name(RopeImpl v) {
  return v == RopeImpl::Fused ? "fused" : "separate";
}
const char* impl_name(EmbeddingGradImpl v) {
  return v == EmbeddingGradImpl::Sorted ? "sorted" : "scan";
}
const char* impl_name(LossImpl v) {
  return v == LossImpl::Chunked ? "chunked" : "full_logits";
}
const char* impl_name(GemmEpilogue v) {
  return v == GemmEpilogue::Residual ? "residual" : "none";
}
const char* impl_name(OptimizerImpl v) {
  switch (v) {
    case OptimizerImpl::PerTensor:
      return "per_tensor";
    case OptimizerImpl::Fused:
      return "fused";
    case OptimizerImpl::FusedPerLayer:
      return "fused_per_layer";
  }
  return "?";
}
const char* impl_name(Execution v) {
  return v == Execution::Graph ? "graph" : "eager";
}
const char* impl_name(ActivationsImpl v) {
  switch (v) {
    case ActivationsImpl::Stored:
      return "stored";
    case ActivationsImpl::RecomputeNorms:
      return "recompute_norms";
    case ActivationsImpl::RecomputeNormsSwiglu:
      return "recompute";
    case ActivationsImpl::Auto:
      return "auto";
  }
  return "?";
}
const char* impl_name(GradBuffers v) {
  return v == GradBuffers::Ring ? "ring" : "full";
}
const char* impl_name(LossScaling v) {
  return v == LossScaling::Dynamic ? "dynamic" : "none";
}
const char* impl_name(KernelLaunch v) {
  switch (v) {
    case KernelLaunch::Plain:
      return "plain";
    case KernelLaunch::Pdl:
      return "pdl";
    case KernelLaunch::Auto:
      return "auto";
  }
  return "?";
}

bool operator==(const OpChoices& a, const OpChoices& b) {
  return a.qkv_gemm == b.qkv_gemm && a.gate_up_gemm == b.gate_up_gemm &&
         a.attention == b.attention && a.swiglu == b.swiglu && a.norm == b.norm &&
         a.rope == b.rope && a.embedding_grad == b.embedding_grad && a.loss == b.loss &&
         a.epilogue == b.epilogue && a.optimizer == b.optimizer && a.execution == b.execution &&
         a.activations == b.activations && a.grad_buffers == b.grad_buffers &&
         a.kernel_launch == b.kernel_launch;
}

std::vector<NamedChoice> named_choices(const OpChoices& ops) {
  return {{"qkv_gemm", impl_name(ops.qkv_gemm)},
          {"gate_up_gemm", impl_name(ops.gate_up_gemm)},
          {"attention", impl_name(ops.attention)},
          {"swiglu", impl_name(ops.swiglu)},
          {"norm", impl_name(ops.norm)},
          {"rope", impl_name(ops.rope)},
          {"embedding_grad", impl_name(ops.embedding_grad)},
          {"loss", impl_name(ops.loss)},
          {"gemm_epilogue", impl_name(ops.epilogue)},
          {"optimizer", impl_name(ops.optimizer)},
          {"execution", impl_name(ops.execution)},
          {"activations", impl_name(ops.activations)},
          {"grad_buffers", impl_name(ops.grad_buffers)},
          {"kernel_launch", impl_name(ops.kernel_launch)}};
}

std::vector<std::string> implemented_levels() {
  return {"v1", "v2", "v3", "v4"};
}

OpChoices level_preset(const std::string& name) {
  OpChoices ops;  // the defaults are v2's choices
  if (name == "v1") {
    ops.qkv_gemm = ops.gate_up_gemm = GemmGrouping::Separate;
    ops.attention = AttentionImpl::Materialized;
    ops.swiglu = SwigluImpl::Separate;
    ops.optimizer = OptimizerImpl::PerTensor;
    ops.execution = Execution::Eager;
    return ops;
  }
  // DESIGN §2 lists the multi-tensor AdamW under v3; v2 takes it early
  // because v2's speed target needs the optimizer in one launch (50
  // per-tensor launches plus a convert pass were ~35 % of the bf16 step).
  if (name == "v2") return ops;
  // v3: v2 with the custom fused kernels, and the activations and
  // gradients kept only as long as they are cheaper to keep (DESIGN §2).
  if (name == "v3" || name == "v4") {
    ops.norm = NormImpl::Fused;
    ops.loss = LossImpl::Chunked;
    ops.rope = RopeImpl::Fused;
    ops.activations = ActivationsImpl::Auto;
    ops.grad_buffers = GradBuffers::Ring;
  }
  if (name == "v3") return ops;
  // v4: v3 with the residual adds in the GEMM epilogues, attention timed
  // per shape between our flash and cuDNN's SDPA (DESIGN §2), and the
  // kernels launched programmatically (the launch-bound small step).
  if (name == "v4") {
    ops.epilogue = GemmEpilogue::Residual;
    ops.attention = AttentionImpl::Auto;
    ops.kernel_launch = KernelLaunch::Auto;
    return ops;
  }
  std::string allowed;
  for (const std::string& level : implemented_levels()) {
    allowed += (allowed.empty() ? "" : ", ") + level;
  }
  throw UsageError("--version " + (name.empty() ? std::string("''") : name) +
                   ": allowed values are " + allowed);
}

std::vector<OpChoices> single_changes(const OpChoices& preset) {
  std::vector<OpChoices> out;
  auto each = [&](auto OpChoices::*field, const auto& all) {
    for (auto impl : all) {
      if (impl == preset.*field) continue;
      OpChoices changed = preset;
      changed.*field = impl;
      out.push_back(changed);
    }
  };
  each(&OpChoices::qkv_gemm, kGroupings);
  each(&OpChoices::gate_up_gemm, kGroupings);
  each(&OpChoices::attention, kAttentions);
  each(&OpChoices::swiglu, kSwiglus);
  each(&OpChoices::norm, kNorms);
  each(&OpChoices::rope, kRopes);
  each(&OpChoices::embedding_grad, kEmbeddingGrads);
  each(&OpChoices::loss, kLosses);
  each(&OpChoices::epilogue, kEpilogues);
  each(&OpChoices::optimizer, kOptimizers);
  each(&OpChoices::execution, kExecutions);
  each(&OpChoices::activations, kActivations);
  each(&OpChoices::kernel_launch, kKernelLaunches);
  // Not grad_buffers: the ring computes what full does and only stores it
  // differently, and it keeps no whole gradient for a variant's test to
  // read (tests/model/grad_ring_test.cc checks it against full).
  return out;
}

DeviceCaps DeviceCaps::cpu() {
  return DeviceCaps{};
}

std::string Fallback::describe() const {
  return op + " " + wanted + " -> " + using_ + ": " + reason;
}

std::int64_t StepPlan::workspace_bytes() const {
  std::int64_t total = 0;
  for (const Workspace& w : workspaces) total += w.bytes;
  return total;
}

std::string StepPlan::describe() const {
  std::string out;
  for (const NamedChoice& c : named_choices(ops)) {
    out += (out.empty() ? "" : " | ") + std::string(c.op) + " " + c.impl;
    if (std::string(c.op) == "loss" && ops.loss == LossImpl::Chunked) {
      out += " (" + std::to_string(loss_chunk_rows) + " rows per chunk)";
    }
  }
  out += std::string(" | loss_scaling ") + impl_name(loss_scaling);
  if (update.accumulates()) out += " | " + std::to_string(update.accumulation) + " micro-batches";
  if (parallel_branches) out += " | parallel branches";
  return out;
}

namespace {

// ActivationsImpl::Auto: recompute the norms and SwiGLU where the kept
// activations would be large (or the step is fp32 and not tiny), the norms
// alone where they are mid-sized.
void resolve_activations(StepPlan& plan, const ModelConfig& cfg, BatchShape shape) {
  OpChoices& ops = plan.ops;
  if (ops.activations != ActivationsImpl::Auto) return;
  const std::int64_t size = shape.tokens() * cfg.hidden_dim;
  const std::string tokens_x_hidden = std::to_string(shape.tokens()) + " tokens x hidden ";
  if (plan.precision.compute == DType::F32) {
    const bool fp32_large = size >= kRecomputeFp32FromTokenHidden;
    ops.activations = fp32_large ? ActivationsImpl::RecomputeNormsSwiglu : ActivationsImpl::Stored;
    plan.activations_auto = std::string("auto chose ") + impl_name(ops.activations) +
                            ": fp32 step, " + tokens_x_hidden + (fp32_large ? ">= " : "< ") +
                            std::to_string(kRecomputeFp32FromTokenHidden);
    return;
  }
  const bool wide = cfg.hidden_dim >= kRecomputeFromHidden;
  const bool large = size >= kRecomputeFromTokenHidden;
  const bool mid = size >= kRecomputeNormsFromTokenHidden;
  if (wide && large) {
    ops.activations = ActivationsImpl::RecomputeNormsSwiglu;
  } else {
    ops.activations = mid ? ActivationsImpl::RecomputeNorms : ActivationsImpl::Stored;
  }
  std::string size_vs = ">= " + std::to_string(kRecomputeFromTokenHidden);
  if (!large) {
    size_vs = (mid ? "< " + std::to_string(kRecomputeFromTokenHidden) + ", >= " : "< ") +
              std::to_string(kRecomputeNormsFromTokenHidden);
  }
  plan.activations_auto = std::string("auto chose ") + impl_name(ops.activations) + ": hidden " +
                          std::to_string(cfg.hidden_dim) + (wide ? " >= " : " < ") +
                          std::to_string(kRecomputeFromHidden) + ", " + tokens_x_hidden + size_vs;
}

// The fused forms whose conditions are the attention's and the device's:
// after attention is resolved (auto included).
void resolve_rope_and_swiglu(StepPlan& plan, const DeviceCaps& caps, const ModelConfig& cfg) {
  OpChoices& ops = plan.ops;
  // Only our flash backward has the rotation in it.
  if (ops.rope == RopeImpl::Fused && backward_attention(ops.attention) != AttentionImpl::Flash) {
    fall_back(plan, "rope", ops.rope, RopeImpl::Separate,
              "the backward rotation is fused into the flash attention backward only (attention " +
                  std::string(impl_name(ops.attention)) + ")");
  }
  if (ops.swiglu == SwigluImpl::Gemm) {
    const std::string why =
        ops.gate_up_gemm != GemmGrouping::Fused
            ? std::string(
                  "the gate/up GEMM's epilogue needs both halves in one GEMM (gate_up_gemm "
                  "separate)")
            : swiglu_gemm_unsupported(caps, plan.precision.compute, cfg.hidden_dim, cfg.ffn_dim);
    if (!why.empty()) fall_back(plan, "swiglu", ops.swiglu, SwigluImpl::Fused, why);
  }
}

// The per-layer sweeps beside the backward pass, unless the update needs
// the whole gradient first.
void resolve_optimizer(StepPlan& plan, const PlanRequest& request, const std::string& device) {
  OpChoices& ops = plan.ops;
  if (ops.optimizer == OptimizerImpl::FusedPerLayer) {
    if (request.update.accumulates()) {
      fall_back(plan, "optimizer", ops.optimizer, OptimizerImpl::Fused,
                "gradient accumulation: the update waits for the last micro-batch's gradients, "
                "summed with the others'");
    } else if (request.update.clip_norm > 0) {
      fall_back(plan, "optimizer", ops.optimizer, OptimizerImpl::Fused,
                "gradient clipping: every update waits for the norm of the whole gradient");
    } else if (!plan.parallel_branches) {
      fall_back(plan, "optimizer", ops.optimizer, OptimizerImpl::Fused,
                "the per-layer sweeps run on a branch of a captured step, and this step " +
                    std::string(plan.captured() ? "has no parallel branches on " + device
                                                : "runs eagerly"));
    } else if (plan.loss_scaling == LossScaling::Dynamic) {
      fall_back(plan, "optimizer", ops.optimizer, OptimizerImpl::Fused,
                "fp16 loss scaling: every update waits for the overflow scan of the whole "
                "gradient");
    }
  }
}

// The gradient ring, where nothing reads the whole gradient after the
// backward pass.
void resolve_grad_buffers(StepPlan& plan, const PlanRequest& request) {
  OpChoices& ops = plan.ops;
  if (ops.grad_buffers == GradBuffers::Ring) {
    if (ops.optimizer != OptimizerImpl::FusedPerLayer) {
      fall_back(plan, "grad_buffers", ops.grad_buffers, GradBuffers::Full,
                std::string("a layer's gradient slot is reused once its sweep beside the backward "
                            "pass has read it, and this step's optimizer is ") +
                    impl_name(ops.optimizer) + " (it reads the whole gradient after the backward)");
    } else if (request.update.report_norm) {
      fall_back(plan, "grad_buffers", ops.grad_buffers, GradBuffers::Full,
                "the gradient norm reads the whole gradient after the backward pass, and the ring "
                "keeps only two layers' gradients");
    } else if (!request.whole_gradient_reader.empty()) {
      fall_back(plan, "grad_buffers", ops.grad_buffers, GradBuffers::Full,
                request.whole_gradient_reader + ", and the ring keeps only two layers' gradients");
    }
  }
}

void resolve_kernel_launch(StepPlan& plan, const DeviceCaps& caps) {
  OpChoices& ops = plan.ops;
  if (ops.kernel_launch == KernelLaunch::Auto) {
    // H100, B8 S128 (eighth session): pdl 2-3 % faster in bf16, 2 % slower
    // in fp32, where the graph's branches carry more of the step.
    const bool amp = plan.precision.compute == DType::BF16 || plan.precision.compute == DType::F16;
    ops.kernel_launch = amp ? KernelLaunch::Pdl : KernelLaunch::Plain;
    plan.kernel_launch_auto =
        std::string("auto chose ") + impl_name(ops.kernel_launch) +
        (amp ? ": mixed precision" : ": full precision (fp32 ran slower with pdl)");
  }
  if (ops.kernel_launch == KernelLaunch::Pdl && !caps.no_programmatic_launch.empty()) {
    fall_back(plan, "kernel_launch", ops.kernel_launch, KernelLaunch::Plain,
              caps.no_programmatic_launch);
  }
}

}  // namespace

StepPlan resolve_plan(const PlanRequest& request, const DeviceCaps& caps, const ModelConfig& cfg,
                      BatchShape shape) {
  StepPlan plan;
  plan.level = request.level;
  plan.device = caps.kind;
  plan.precision = request.precision;
  plan.ops = request.ops;
  OpChoices& ops = plan.ops;
  const std::string device = device_name(caps.kind);

  resolve_attention(plan, caps, cfg, request.saved_attention);
  resolve_activations(plan, cfg, shape);
  resolve_rope_and_swiglu(plan, caps, cfg);
  resolve_fp8(plan, request, caps, cfg, shape);
  if (ops.execution == Execution::Graph && !caps.graphs) {
    fall_back(plan, "execution", ops.execution, Execution::Eager,
              "the " + device + " backend runs eagerly");
  }
  // fp16's narrow range needs GradScaler's dynamic loss scaling; bf16 and
  // fp32 have fp32's exponent range and run unscaled.
  plan.loss_scaling =
      plan.precision.compute == DType::F16 ? LossScaling::Dynamic : LossScaling::None;
  // Branches pay off inside a captured step, where forking costs nothing;
  // an eager step would pay two event calls per GEMM on the host.
  plan.parallel_branches = plan.captured() && caps.parallel_branches;
  plan.update = request.update;
  plan.keeps_final_norm = !request.final_norm_reader.empty();
  resolve_optimizer(plan, request, device);
  resolve_grad_buffers(plan, request);
  resolve_kernel_launch(plan, caps);
  if (ops.loss == LossImpl::Chunked) {
    plan.loss_chunk_rows = request.loss_chunk_rows > 0
                               ? std::min(request.loss_chunk_rows, shape.tokens())
                               : loss_chunk_rows(cfg, shape, plan.precision);
  }
  plan.kernels = resolve_kernels(caps, cfg, shape, plan.precision.compute, request.kernel_pins);
  return plan;
}

void fall_back_to_full_gradients(StepPlan& plan, std::string reason) {
  if (plan.ops.grad_buffers != GradBuffers::Ring) return;
  fall_back(plan, "grad_buffers", plan.ops.grad_buffers, GradBuffers::Full, std::move(reason));
}

std::int64_t loss_chunk_rows(const ModelConfig& cfg, BatchShape shape, Precision precision) {
  // 512 MiB: on the H100 at the GPT-2 size (bf16, 1.6 GB of logits), 4
  // chunks ran 0.5 ms faster than 7 of 256 MiB for 0.17 GB more peak
  // (docs/log/2026-11-24.md, seventh session). But logits of more than
  // 256 MiB take two chunks at least: at 1 B (500 MiB of logits) two chunks
  // of 250 MiB ran as fast as one, for 250 MiB less peak
  // (docs/log/2026-11-29.md, first session, call 3).
  constexpr std::int64_t kChunkBytes = std::int64_t{512} << 20;
  constexpr std::int64_t kOneChunkBytes = std::int64_t{256} << 20;
  constexpr std::int64_t kRowMultiple = 128;
  const std::int64_t rows = shape.tokens();
  const std::int64_t row_bytes = static_cast<std::int64_t>(cfg.padded_vocab()) *
                                 static_cast<std::int64_t>(dtype_size(precision.compute));
  const std::int64_t logit_bytes = rows * row_bytes;
  const std::int64_t chunks = std::max<std::int64_t>(logit_bytes > kOneChunkBytes ? 2 : 1,
                                                     (logit_bytes + kChunkBytes - 1) / kChunkBytes);
  if (chunks == 1) return std::max<std::int64_t>(rows, 1);
  const std::int64_t per = (rows + chunks - 1) / chunks;
  return std::min(rows, (per + kRowMultiple - 1) / kRowMultiple * kRowMultiple);
}

StepPlan plan_for_choices(const OpChoices& ops, Precision precision, const DeviceCaps& caps,
                          const ModelConfig& cfg, BatchShape shape) {
  PlanRequest request;
  request.level = "custom";
  request.ops = ops;
  request.precision = precision;
  return resolve_plan(request, caps, cfg, shape);
}

StepPlan plan_for_level(const std::string& level, Precision precision, const DeviceCaps& caps,
                        const ModelConfig& cfg, BatchShape shape) {
  PlanRequest request;
  request.level = level;
  request.ops = level_preset(level);
  request.precision = precision;
  return resolve_plan(request, caps, cfg, shape);
}

std::string amp_dtype_name(Precision precision) {
  if (precision.fp8_linears) return "float8";
  return precision.mixed() ? std::string(dtype_name(precision.compute)) : std::string();
}

std::string precision_name(Precision precision) {
  if (precision.mixed()) return "amp_" + amp_dtype_name(precision);
  return precision.compute == DType::F64 ? "fp64" : "fp32";
}

const char* device_name(DeviceKind device) {
  return device == DeviceKind::Cuda ? "cuda" : "cpu";
}

}  // namespace tinyllama
