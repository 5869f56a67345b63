#pragma once
// The FP8 model and plans the GPU tests train: every linear dimension and
// the token count multiples of 16, so that every GEMM may run in FP8.
#include "gpu_model_util.h"
#include "model/config.h"
#include "model/fp8_plan.h"
#include "model/step_plan.h"

namespace tinyllama::gpu_test {

// The whole-step tests' model with an FFN width that is a multiple of 16.
inline ModelConfig fp8_config() {
  ModelConfig c = small_gqa_config();
  c.ffn_dim = 192;
  return c;
}
inline constexpr BatchShape kFp8Shape{2, 64};

// `plan` with every linear GEMM in FP8 under delayed scaling and the
// producers writing their codes, as resolve_plan sets them on a GPU (the
// SwiGLU epilogue, which FP8 GEMMs do not have, given up). `lean`: the
// weights cast from the master, and the gate/up gradient and the stored
// SwiGLU output kept as codes only (Fp8Linears::master_weights,
// swiglu_grad_codes_only, swiglu_keeps_codes).
inline StepPlan all_fp8_delayed(StepPlan plan, const ModelConfig& cfg, BatchShape shape,
                                bool lean) {
  plan.fp8 = choose_fp8_linears(cfg, shape, Fp8Choice::All, Fp8Scaling::Delayed,
                                Fp8Producers{plan.ops.swiglu != SwigluImpl::Separate});
  plan.fp8.norm_casts = true;
  plan.fp8.master_weights = lean;
  plan.fp8.swiglu_grad_codes_only = lean;
  plan.fp8.swiglu_keeps_codes = lean && !recomputes_swiglu(plan.ops.activations);
  if (plan.ops.swiglu == SwigluImpl::Gemm) plan.ops.swiglu = SwigluImpl::Fused;
  return plan;
}

}  // namespace tinyllama::gpu_test
