#include "model/step_plan_json.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace tinyllama {

nlohmann::json kernels_json(const KernelChoices& k) {
  return {{"flash_forward", kernel_name(k.flash_forward)},
          {"flash_backward", kernel_name(k.flash_backward)},
          {"flash_delta", kernel_name(k.flash_delta)},
          {"swiglu_forward", kernel_name(k.swiglu_forward)},
          {"swiglu_backward", kernel_name(k.swiglu_backward)},
          {"norm_weight_sum", kernel_name(k.norm_weight_sum)},
          {"norm_long_rows", kernel_name(k.norm_long_rows)},
          {"loss_rows", kernel_name(k.loss_rows)}};
}

namespace {

// Per linear: the passes in FP8 and the estimate that chose them.
nlohmann::json fp8_json(const Fp8Linears& f) {
  nlohmann::json out = nlohmann::json::object();
  for (int k = 0; k < kLinearKinds; ++k) {
    nlohmann::json passes = nlohmann::json::array();
    for (int p = 0; p < kLinearPasses; ++p) {
      if (f.use[k][p]) passes.push_back(linear_pass_name(static_cast<LinearPass>(p)));
    }
    out[linear_name(static_cast<LinearKind>(k))] = {{"fp8_passes", passes},
                                                    {"estimate_bf16_ms", f.bf16_ms[k]},
                                                    {"estimate_chosen_ms", f.chosen_ms[k]}};
  }
  return out;
}

}  // namespace

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
                        {"kernels", kernels_json(plan.kernels)},
                        {"loss_scaling", impl_name(plan.loss_scaling)},
                        {"parallel_branches", plan.parallel_branches},
                        {"workspaces", workspaces},
                        {"workspace_bytes", plan.workspace_bytes()},
                        {"fallbacks", fallbacks}};
  if (plan.attention_auto.requested) out["attention_auto"] = attention_choice_json(plan);
  if (!plan.activations_auto.empty()) out["activations_auto"] = plan.activations_auto;
  if (!plan.kernel_launch_auto.empty()) out["kernel_launch_auto"] = plan.kernel_launch_auto;
  if (plan.precision.fp8_linears) {
    out["fp8_gemms"] = fp8_json(plan.fp8);
    out["fp8_scaling"] = fp8_scaling_name(plan.fp8.scaling);
    out["fp8_swiglu_casts"] = plan.fp8.swiglu_casts;
    out["fp8_norm_casts"] = plan.fp8.norm_casts;
    out["fp8_master_weights"] = plan.fp8.master_weights;
    out["fp8_swiglu_grad_codes_only"] = plan.fp8.swiglu_grad_codes_only;
    out["fp8_swiglu_keeps_codes"] = plan.fp8.swiglu_keeps_codes;
  }
  return out;
}

nlohmann::json attention_choice_json(const StepPlan& plan) {
  const AttentionAuto& a = plan.attention_auto;
  auto timing = [](bool timed, const AttentionTiming& t) -> nlohmann::json {
    if (!timed) return nullptr;
    return {{"forward_ms", t.forward_ms},
            {"backward_ms", t.backward_ms},
            {"total_ms", t.total_ms()},
            {"forward_workspace_bytes", t.forward_workspace_bytes},
            {"workspace_bytes", t.workspace_bytes}};
  };
  return {{"chosen", impl_name(plan.ops.attention)},
          {"flash", timing(a.flash_timed, a.flash)},
          {"cudnn", timing(a.cudnn_timed, a.cudnn)},
          {"notes", a.notes},
          {"reused_from",
           a.reused_from.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.reused_from)}};
}

SavedAttentionChoice attention_choice_from_json(const nlohmann::json& j, const std::string& from) {
  SavedAttentionChoice s;
  s.from = from;
  try {
    const std::string chosen = j.at("chosen").get<std::string>();
    bool known = false;
    for (const AttentionImpl impl : {AttentionImpl::Materialized, AttentionImpl::Flash,
                                     AttentionImpl::Cudnn, AttentionImpl::CudnnFlash}) {
      if (chosen == impl_name(impl)) {
        s.chosen = impl;
        known = true;
      }
    }
    if (!known)
      throw RuntimeFailure(from + ": attention auto chose '" + chosen + "', unknown here");
    auto timing = [&](const char* key, bool& timed, AttentionTiming& t) {
      const nlohmann::json& v = j.at(key);
      timed = !v.is_null();
      // Checkpoints written before the workspaces were recorded have none.
      if (timed) {
        t = {v.at("forward_ms").get<double>(), v.at("backward_ms").get<double>(),
             v.value("forward_workspace_bytes", std::int64_t{0}),
             v.value("workspace_bytes", std::int64_t{0})};
      }
    };
    timing("flash", s.how.flash_timed, s.how.flash);
    timing("cudnn", s.how.cudnn_timed, s.how.cudnn);
    s.how.notes = j.at("notes").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure(from + ": the saved attention choice is damaged (" + e.what() + ")");
  }
  s.how.requested = true;
  return s;
}

}  // namespace tinyllama
