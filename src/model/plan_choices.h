#pragma once
// Internal to the plan's resolution (step_plan.cc, attention_plan.cc,
// step_plan_fp8.cc): how a choice the plan cannot keep is recorded,
// attention's resolution -- the fallbacks of an explicit choice, or
// attention=auto's timing and pick -- and FP8's.
#include <optional>
#include <string>
#include <utility>

#include "model/step_plan.h"

namespace tinyllama {

// Replaces `choice` by `fallback` and records why.
template <typename Impl>
void fall_back(StepPlan& plan, const char* op, Impl& choice, Impl fallback, std::string reason) {
  plan.fallbacks.push_back({op, impl_name(choice), impl_name(fallback), std::move(reason)});
  choice = fallback;
}

// plan.ops.attention resolved on this device: auto timed and chosen (or
// taken from `saved` on resume), an explicit choice kept or fallen back.
void resolve_attention(StepPlan& plan, const DeviceCaps& caps, const ModelConfig& cfg,
                       const std::optional<SavedAttentionChoice>& saved);

// --amp-dtype float8 (step_plan_fp8.cc): plan.fp8, the GEMMs in FP8 and the
// producers and buffers that serve them, with their fallbacks.
void resolve_fp8(StepPlan& plan, const PlanRequest& request, const DeviceCaps& caps,
                 const ModelConfig& cfg, BatchShape shape);

}  // namespace tinyllama
