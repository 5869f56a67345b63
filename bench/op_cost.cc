#include "bench/op_cost.h"

#include "core/errors.h"
#include "model/param_layout.h"
#include "train/backend_factory.h"

namespace tinyllama::bench {
namespace {

// The one call into the cost model: the work as a captured step with
// parallel branches runs it, whatever device the bench runs on.
prof::StepCost step_cost_for(const ModelConfig& cfg, BatchShape batch, const ImplChoice& impl,
                             Precision precision) {
  DeviceCaps captured;
  captured.graphs = captured.parallel_branches = true;
  return prof::step_cost(cfg, batch, plan_for(cfg, batch, impl, precision, captured));
}

// Layer 0's share of the optimizer phase, for variants the cost model
// counts only over the whole model (per-tensor AdamW; fused sweeps under
// fp16, which sweep once after the backward pass): the phase's ops scaled
// by the layer's share of the parameters. Exact for per-tensor AdamW (its
// cost is linear in the parameters); the sweeps and the AMP weight
// refresh also touch the slots' alignment padding (at most 63 elements a
// slot), which moves the figure by far less than 0.1 %.
prof::OpCost layer_share_of_optimizer(const prof::StepCost& step, const ModelConfig& cfg) {
  const ParamLayout layout(cfg);
  std::int64_t all = 0;
  for (const ParamSlot& s : layout.slots()) all += s.numel();
  const ParamSpan span = layout.layer_span(0);
  std::int64_t layer = 0;
  for (const ParamSlot& s : layout.slots()) {
    if (s.offset >= span.begin && s.offset < span.end) layer += s.numel();
  }
  prof::OpCost out;
  out.path = kLayerAdamwPath;
  out.phase = "backward";
  out.layer = 0;
  out.op = "adamw";
  out.kind = prof::OpKind::Optimizer;
  bool found = false;
  for (const prof::OpCost& o : step.ops) {
    if (o.phase != "optimizer") continue;
    found = true;
    // Scaled in long double: flops * layer overflows 64 bits at 1 B parameters.
    const long double share = static_cast<long double>(layer) / static_cast<long double>(all);
    out.flops += static_cast<std::int64_t>(static_cast<long double>(o.flops) * share);
    out.bytes += static_cast<std::int64_t>(static_cast<long double>(o.bytes) * share);
  }
  if (!found) throw RuntimeFailure("cost model: no optimizer phase to take layer 0's share of");
  return out;
}

}  // namespace

StepPlan plan_for(const ModelConfig& cfg, BatchShape batch, const ImplChoice& impl,
                  Precision precision, const DeviceCaps& caps) {
  OpChoices ops = level_preset("v2");
  ops.qkv_gemm = impl.fused_qkv ? GemmGrouping::Fused : GemmGrouping::Separate;
  ops.gate_up_gemm = impl.fused_ffn ? GemmGrouping::Fused : GemmGrouping::Separate;
  ops.swiglu = impl.fused_ffn ? SwigluImpl::Fused : SwigluImpl::Separate;
  if (impl.swiglu_gemm) ops.swiglu = SwigluImpl::Gemm;
  ops.attention = impl.attention;
  ops.optimizer = impl.fused_optimizer ? OptimizerImpl::FusedPerLayer : OptimizerImpl::PerTensor;
  ops.norm = impl.fused_norm ? NormImpl::Fused : NormImpl::Plain;
  ops.loss = impl.chunked_loss ? LossImpl::Chunked : LossImpl::FullLogits;
  ops.embedding_grad =
      impl.sorted_embedding_grad ? EmbeddingGradImpl::Sorted : EmbeddingGradImpl::Scan;
  ops.rope = impl.fused_rope ? RopeImpl::Fused : RopeImpl::Separate;
  ops.activations =
      impl.recompute_norms ? ActivationsImpl::RecomputeNorms : ActivationsImpl::Stored;
  ops.execution = Execution::Graph;
  PlanRequest request;
  request.level = "custom";
  request.ops = ops;
  request.precision = precision;
  request.kernel_pins = impl.kernels;
  return resolve_plan(request, run_caps(caps, request, cfg, batch), cfg, batch);
}

prof::OpCost cost_of(const ModelConfig& cfg, BatchShape batch, const ImplChoice& impl,
                     Precision precision, const std::string& path) {
  const prof::StepCost step = step_cost_for(cfg, batch, impl, precision);
  if (const prof::OpCost* op = step.find(path)) return *op;
  if (path == kLayerAdamwPath) return layer_share_of_optimizer(step, cfg);
  throw RuntimeFailure("kernel bench: the cost model has no op '" + path + "'");
}

std::vector<prof::OpCost> all_costs(const ModelConfig& cfg, BatchShape batch,
                                    const ImplChoice& impl, Precision precision) {
  return step_cost_for(cfg, batch, impl, precision).ops;
}

}  // namespace tinyllama::bench
