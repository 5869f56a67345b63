#pragma once
// The resolved plan as JSON, the same object in `train --json` (key "plan")
// and in the profile's summary.json, so tools read one format.
#include <nlohmann/json_fwd.hpp>

#include "model/step_plan.h"

namespace tinyllama {

// {"level", "device", "precision", "ops": {op: impl}, "kernels":
//  kernels_json(plan.kernels), "loss_scaling",
//  "parallel_branches", "workspaces": {name: bytes}, "workspace_bytes",
//  "fallbacks": [{"op", "wanted", "using", "reason"}]}, and with
// attention=auto "attention_auto": attention_choice_json(plan).
nlohmann::json plan_json(const StepPlan& plan);
// The kernel families of a plan, by name: {"flash_forward": "pingpong128", ...}.
nlohmann::json kernels_json(const KernelChoices& k);

// attention=auto's decision: {"chosen", "flash" and "cudnn" (each
// {"forward_ms", "backward_ms", "total_ms"}, or null when not timed),
// "notes", "reused_from" (the checkpoint it came from, or null)}. A
// checkpoint keeps this object, and a resumed run reads it back.
nlohmann::json attention_choice_json(const StepPlan& plan);
// Throws RuntimeFailure naming `from` for an object that is not one.
SavedAttentionChoice attention_choice_from_json(const nlohmann::json& j, const std::string& from);

}  // namespace tinyllama
