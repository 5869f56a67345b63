#pragma once
// The workshop's --enable-*/--disable-* flags, applied on top of a level's
// preset choices (model/step_plan.h) for ablation. The result does not
// depend on the order of the flags on the command line: preset first, then
// the all-fusion pair, then each toggle's own pair.
#include <string>

#include "model/step_plan.h"

namespace tinyllama {

// Whether --enable-X and/or --disable-X were given.
struct TogglePair {
  bool enable = false;
  bool disable = false;
};

// Each toggle sets the plan choices it names: qkv_fusion the Q/K/V GEMM;
// swiglu_fusion the gate/up GEMM and silu*mul; flash_attention the
// attention; cuda_graphs the execution; fused_optimizer the optimizer
// (FusedPerLayer when on, which resolve_plan narrows to what can run).
struct ToggleFlags {
  TogglePair all_fusion;  // every toggle below at once, like the workshop's flag
  TogglePair qkv_fusion;
  TogglePair swiglu_fusion;
  TogglePair flash_attention;
  TogglePair cuda_graphs;
  TogglePair fused_optimizer;
  // --attention materialized|flash|cudnn|auto; empty: not given. Applied
  // last; with --enable/--disable-flash-attention it is a usage error.
  std::string attention;
  // --norm plain|fused, --loss full_logits|chunked; empty: not given.
  std::string norm;
  std::string loss;
  // --activations stored|recompute_norms|recompute; empty: not given.
  std::string activations;
  // --gemm-epilogue none|residual; empty: not given.
  std::string gemm_epilogue;
  // --swiglu separate|fused|gemm; empty: not given. Applied after
  // --enable/--disable-swiglu-fusion.
  std::string swiglu;
  // --rope separate|fused; empty: not given.
  std::string rope;
  // --grad-buffers full|ring; empty: not given.
  std::string grad_buffers;
  // --kernel-launch plain|pdl; empty: not given.
  std::string kernel_launch;
  // --optimizer per_tensor|fused|fused_per_layer; empty: not given. Applied
  // last; with --enable/--disable-fused-optimizer it is a usage error.
  std::string optimizer;
};

// "materialized", "flash", "cudnn" or "auto"; UsageError naming them otherwise.
AttentionImpl parse_attention(const std::string& value);
// "plain" or "fused"; UsageError naming them otherwise.
NormImpl parse_norm(const std::string& value);
// "full_logits" or "chunked"; UsageError naming them otherwise.
LossImpl parse_loss(const std::string& value);
// "stored", "recompute_norms" or "recompute"; UsageError naming them otherwise.
ActivationsImpl parse_activations(const std::string& value);
// "none" or "residual"; UsageError naming them otherwise.
GemmEpilogue parse_gemm_epilogue(const std::string& value);
// "separate", "fused" or "gemm"; UsageError naming them otherwise.
SwigluImpl parse_swiglu(const std::string& value);
// "separate" or "fused"; UsageError naming them otherwise.
RopeImpl parse_rope(const std::string& value);
// "full" or "ring"; UsageError naming them otherwise.
GradBuffers parse_grad_buffers(const std::string& value);
// "plain" or "pdl"; UsageError naming them otherwise.
KernelLaunch parse_kernel_launch(const std::string& value);
// "per_tensor", "fused" or "fused_per_layer"; UsageError naming them otherwise.
OptimizerImpl parse_optimizer(const std::string& value);

// Throws UsageError when both halves of a pair are given.
OpChoices apply_toggle_flags(OpChoices preset, const ToggleFlags& flags);

}  // namespace tinyllama
