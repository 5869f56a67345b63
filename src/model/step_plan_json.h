#pragma once
// The resolved plan as JSON, the same object in `train --json` (key "plan")
// and in the profile's summary.json, so tools read one format.
#include <nlohmann/json_fwd.hpp>

#include "model/step_plan.h"

namespace tinyllama {

// {"level", "device", "precision", "ops": {op: impl}, "loss_scaling",
//  "parallel_branches", "workspaces": {name: bytes}, "workspace_bytes",
//  "fallbacks": [{"op", "wanted", "using", "reason"}]}
nlohmann::json plan_json(const StepPlan& plan);

}  // namespace tinyllama
