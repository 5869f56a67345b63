#include "model/step_plan_json.h"

#include <nlohmann/json.hpp>

namespace tinyllama {

nlohmann::json plan_json(const StepPlan& plan) {
  nlohmann::json ops = nlohmann::json::object();
  for (const NamedChoice& c : named_choices(plan.ops)) ops[c.op] = c.impl;
  nlohmann::json workspaces = nlohmann::json::object();
  for (const Workspace& w : plan.workspaces) workspaces[w.name] = w.bytes;
  nlohmann::json fallbacks = nlohmann::json::array();
  for (const Fallback& f : plan.fallbacks) {
    fallbacks.push_back(
        {{"op", f.op}, {"wanted", f.wanted}, {"using", f.using_}, {"reason", f.reason}});
  }
  nlohmann::json out = {{"level", plan.level},
                        {"device", device_name(plan.device)},
                        {"precision", precision_name(plan.precision)},
                        {"ops", ops},
                        {"loss_scaling", impl_name(plan.loss_scaling)},
                        {"parallel_branches", plan.parallel_branches},
                        {"workspaces", workspaces},
                        {"workspace_bytes", plan.workspace_bytes()},
                        {"fallbacks", fallbacks}};
  const AttentionAuto& a = plan.attention_auto;
  if (a.requested) {
    auto timing = [](bool timed, const AttentionTiming& t) -> nlohmann::json {
      if (!timed) return nullptr;
      return {
          {"forward_ms", t.forward_ms}, {"backward_ms", t.backward_ms}, {"total_ms", t.total_ms()}};
    };
    out["attention_auto"] = {{"chosen", impl_name(plan.ops.attention)},
                             {"flash", timing(a.flash_timed, a.flash)},
                             {"cudnn", timing(a.cudnn_timed, a.cudnn)},
                             {"notes", a.notes}};
  }
  return out;
}

}  // namespace tinyllama
