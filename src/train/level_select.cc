#include "train/level_select.h"

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
    if (flags.flash_attention.enable || flags.flash_attention.disable) {
      throw UsageError("--attention and --" +
                       std::string(flags.flash_attention.enable ? "enable" : "disable") +
                       "-flash-attention: give one of the two");
    }
    ops.attention = parse_attention(flags.attention);
  }
  if (!flags.norm.empty()) ops.norm = parse_norm(flags.norm);
  if (!flags.loss.empty()) ops.loss = parse_loss(flags.loss);
  return ops;
}

AttentionImpl parse_attention(const std::string& value) {
  for (AttentionImpl impl : {AttentionImpl::Materialized, AttentionImpl::Flash,
                             AttentionImpl::Cudnn, AttentionImpl::Auto}) {
    if (value == impl_name(impl)) return impl;
  }
  throw UsageError("--attention " + (value.empty() ? std::string("''") : value) +
                   ": allowed values are materialized, flash, cudnn, auto");
}

NormImpl parse_norm(const std::string& value) {
  for (NormImpl impl : {NormImpl::Plain, NormImpl::Fused}) {
    if (value == impl_name(impl)) return impl;
  }
  throw UsageError("--norm " + (value.empty() ? std::string("''") : value) +
                   ": allowed values are plain, fused");
}

LossImpl parse_loss(const std::string& value) {
  for (LossImpl impl : {LossImpl::FullLogits, LossImpl::Chunked}) {
    if (value == impl_name(impl)) return impl;
  }
  throw UsageError("--loss " + (value.empty() ? std::string("''") : value) +
                   ": allowed values are full_logits, chunked");
}

}  // namespace tinyllama
