#include "train/level_select.h"

#include <initializer_list>
#include <string>

#include "core/errors.h"

namespace tinyllama {
namespace {

// Applies one --enable-NAME / --disable-NAME pair to the toggle(s) it sets.
template <typename Apply>
void apply_pair(const char* name, const TogglePair& pair, Apply apply) {
  if (pair.enable && pair.disable) {
    throw UsageError(std::string("--enable-") + name + " and --disable-" + name +
                     ": contradictory, give at most one of the two");
  }
  if (pair.enable) apply(true);
  if (pair.disable) apply(false);
}

// A value flag (--attention) names what its toggle pair
// (--enable/--disable-flash-attention) switches: both at once is a UsageError.
void refuse_beside_pair(const char* flag, const char* pair_name, const TogglePair& pair) {
  if (pair.enable || pair.disable) {
    throw UsageError(std::string(flag) + " and --" + (pair.enable ? "enable-" : "disable-") +
                     pair_name + ": give one of the two");
  }
}

// The implementation of `impls` named `value` (impl_name), else a UsageError
// naming the flag and every allowed name.
template <typename Impl>
Impl parse_choice(const char* flag, const std::string& value, std::initializer_list<Impl> impls) {
  std::string allowed;
  for (Impl impl : impls) {
    if (value == impl_name(impl)) return impl;
    allowed += (allowed.empty() ? "" : ", ") + std::string(impl_name(impl));
  }
  throw UsageError(std::string(flag) + " " + (value.empty() ? std::string("''") : value) +
                   ": allowed values are " + allowed);
}

}  // namespace

OpChoices apply_toggle_flags(OpChoices ops, const ToggleFlags& flags) {
  const auto qkv = [&](bool on) {
    ops.qkv_gemm = on ? GemmGrouping::Fused : GemmGrouping::Separate;
  };
  const auto swiglu = [&](bool on) {
    ops.gate_up_gemm = on ? GemmGrouping::Fused : GemmGrouping::Separate;
    ops.swiglu = on ? SwigluImpl::Fused : SwigluImpl::Separate;
  };
  const auto flash = [&](bool on) {
    ops.attention = on ? AttentionImpl::Flash : AttentionImpl::Materialized;
  };
  const auto graphs = [&](bool on) { ops.execution = on ? Execution::Graph : Execution::Eager; };
  const auto optimizer = [&](bool on) {
    ops.optimizer = on ? OptimizerImpl::FusedPerLayer : OptimizerImpl::PerTensor;
  };
  apply_pair("all-fusion", flags.all_fusion, [&](bool on) {
    qkv(on);
    swiglu(on);
    flash(on);
    graphs(on);
    optimizer(on);
  });
  apply_pair("qkv-fusion", flags.qkv_fusion, qkv);
  apply_pair("swiglu-fusion", flags.swiglu_fusion, swiglu);
  apply_pair("flash-attention", flags.flash_attention, flash);
  apply_pair("cuda-graphs", flags.cuda_graphs, graphs);
  apply_pair("fused-optimizer", flags.fused_optimizer, optimizer);
  if (!flags.attention.empty()) {
    refuse_beside_pair("--attention", "flash-attention", flags.flash_attention);
    ops.attention = parse_attention(flags.attention);
  }
  if (!flags.norm.empty()) ops.norm = parse_norm(flags.norm);
  if (!flags.loss.empty()) ops.loss = parse_loss(flags.loss);
  if (!flags.activations.empty()) ops.activations = parse_activations(flags.activations);
  if (!flags.gemm_epilogue.empty()) ops.epilogue = parse_gemm_epilogue(flags.gemm_epilogue);
  if (!flags.swiglu.empty()) ops.swiglu = parse_swiglu(flags.swiglu);
  if (!flags.rope.empty()) ops.rope = parse_rope(flags.rope);
  if (!flags.grad_buffers.empty()) ops.grad_buffers = parse_grad_buffers(flags.grad_buffers);
  if (!flags.kernel_launch.empty()) ops.kernel_launch = parse_kernel_launch(flags.kernel_launch);
  if (!flags.optimizer.empty()) {
    refuse_beside_pair("--optimizer", "fused-optimizer", flags.fused_optimizer);
    ops.optimizer = parse_optimizer(flags.optimizer);
  }
  return ops;
}

AttentionImpl parse_attention(const std::string& value) {
  return parse_choice("--attention", value,
                      {AttentionImpl::Materialized, AttentionImpl::Flash, AttentionImpl::Cudnn,
                       AttentionImpl::CudnnFlash, AttentionImpl::Auto});
}

NormImpl parse_norm(const std::string& value) {
  return parse_choice("--norm", value, {NormImpl::Plain, NormImpl::Fused});
}

LossImpl parse_loss(const std::string& value) {
  return parse_choice("--loss", value, {LossImpl::FullLogits, LossImpl::Chunked});
}

ActivationsImpl parse_activations(const std::string& value) {
  return parse_choice("--activations", value,
                      {ActivationsImpl::Stored, ActivationsImpl::RecomputeNorms,
                       ActivationsImpl::RecomputeNormsSwiglu, ActivationsImpl::Auto});
}

GemmEpilogue parse_gemm_epilogue(const std::string& value) {
  return parse_choice("--gemm-epilogue", value, {GemmEpilogue::None, GemmEpilogue::Residual});
}

SwigluImpl parse_swiglu(const std::string& value) {
  return parse_choice("--swiglu", value,
                      {SwigluImpl::Separate, SwigluImpl::Fused, SwigluImpl::Gemm});
}

RopeImpl parse_rope(const std::string& value) {
  return parse_choice("--rope", value, {RopeImpl::Separate, RopeImpl::Fused});
}

GradBuffers parse_grad_buffers(const std::string& value) {
  return parse_choice("--grad-buffers", value, {GradBuffers::Full, GradBuffers::Ring});
}

KernelLaunch parse_kernel_launch(const std::string& value) {
  return parse_choice("--kernel-launch", value,
                      {KernelLaunch::Plain, KernelLaunch::Pdl, KernelLaunch::Auto});
}

OptimizerImpl parse_optimizer(const std::string& value) {
  return parse_choice(
      "--optimizer", value,
      {OptimizerImpl::PerTensor, OptimizerImpl::Fused, OptimizerImpl::FusedPerLayer});
}

}  // namespace tinyllama
