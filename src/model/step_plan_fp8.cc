// resolve_fp8 (plan_choices.h): the FP8 side of resolve_plan.
#include <cstdint>
#include <string>

#include "model/plan_choices.h"

namespace tinyllama {
namespace {

// Where FP8 needs less memory than bf16 AMP, exactly: the weights cast from
// the master (no bf16 copy of an all-FP8 linear; one process, since ZeRO-1
// gathers the copies), the gate/up gradient and the stored SwiGLU output as
// codes only (the CUDA SwiGLU kernels' 64 x 64 tiles of the [tokens, F]
// inputs must fit).
void resolve_fp8_memory(StepPlan& plan, const PlanRequest& request, const DeviceCaps& caps,
                        const ModelConfig& cfg, BatchShape shape) {
  Fp8Linears& fp8 = plan.fp8;
  fp8.master_weights = !request.data_parallel && fp8.any();
  constexpr std::int64_t kSwigluTile = 64;
  const bool swiglu_tiles = caps.kind == DeviceKind::Cuda && fp8.swiglu_casts &&
                            plan.ops.swiglu == SwigluImpl::Fused &&
                            shape.tokens() % kSwigluTile == 0 && cfg.ffn_dim % kSwigluTile == 0;
  const auto both = [&](LinearKind k, LinearPass a, LinearPass b) {
    return fp8.at(k, a) && fp8.at(k, b);
  };
  fp8.swiglu_grad_codes_only =
      swiglu_tiles && both(LinearKind::GateUp, LinearPass::Dgrad, LinearPass::Wgrad);
  fp8.swiglu_keeps_codes = swiglu_tiles && !recomputes_swiglu(plan.ops.activations) &&
                           both(LinearKind::Down, LinearPass::Forward, LinearPass::Wgrad);
}

}  // namespace

// --amp-dtype float8: the linear GEMMs the estimate puts in FP8. One scale
// per weight needs the fused QKV and gate/up GEMMs, and cuBLASLt's FP8 GEMM
// has no SwiGLU epilogue: the gate/up forward and the down projection's
// data gradient in FP8 take the SwiGLU kernel beside them, as does the
// SwiGLU kernel writing FP8 codes (Fp8Linears::swiglu_casts).
void resolve_fp8(StepPlan& plan, const PlanRequest& request, const DeviceCaps& caps,
                 const ModelConfig& cfg, BatchShape shape) {
  if (!plan.precision.fp8_linears) return;
  OpChoices& ops = plan.ops;
  std::string why = caps.no_fp8_gemm;
  if (why.empty() &&
      (ops.qkv_gemm != GemmGrouping::Fused || ops.gate_up_gemm != GemmGrouping::Fused)) {
    why =
        "one FP8 scale per weight needs the fused QKV and gate/up GEMMs (--qkv-fusion, "
        "--swiglu-fusion)";
  }
  if (!why.empty()) {
    plan.fallbacks.push_back({"linear_gemms", "float8", "bfloat16", why});
    return;
  }
  // Data parallel runs keep delayed scaling: the ranks' amaxes are reduced
  // after each pass (Model::reduce_fp8_amaxes), so they share one history.
  const Fp8Scaling scaling = request.fp8_scaling;
  Fp8Producers producers;
  producers.swiglu = ops.swiglu != SwigluImpl::Separate;
  producers.forward_norms = ops.epilogue == GemmEpilogue::Residual;
  producers.recomputed_norms = recomputes_norms(ops.activations);
  plan.fp8 = choose_fp8_linears(cfg, shape, request.fp8_gemms, scaling, producers);
  const bool swiglu_gemm_reads_fp8 = plan.fp8.at(LinearKind::GateUp, LinearPass::Forward) ||
                                     plan.fp8.at(LinearKind::Down, LinearPass::Dgrad);
  if (ops.swiglu == SwigluImpl::Gemm && swiglu_gemm_reads_fp8) {
    fall_back(plan, "swiglu", ops.swiglu, SwigluImpl::Fused,
              "the FP8 GEMM (gate/up forward or down data gradient) has no SwiGLU epilogue");
  } else if (ops.swiglu == SwigluImpl::Gemm && plan.fp8.swiglu_casts) {
    fall_back(plan, "swiglu", ops.swiglu, SwigluImpl::Fused,
              "the SwiGLU kernel writes the FP8 codes of its result for the FP8 GEMMs");
  }
  const auto norm_feeds_fp8 = [&](LinearPass p) {
    return plan.fp8.at(LinearKind::Qkv, p) || plan.fp8.at(LinearKind::GateUp, p);
  };
  plan.fp8.norm_casts =
      scaling == Fp8Scaling::Delayed &&
      ((recomputes_norms(ops.activations) && norm_feeds_fp8(LinearPass::Wgrad)) ||
       (ops.epilogue == GemmEpilogue::Residual && norm_feeds_fp8(LinearPass::Forward)));
  resolve_fp8_memory(plan, request, caps, cfg, shape);
}

}  // namespace tinyllama
