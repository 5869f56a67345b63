#pragma once
// Plans for tests: a level's plan on a backend, and the variants a level is
// tested as (DESIGN §2: each preset, and each preset with one choice
// changed -- not the product of every choice).
#include <string>
#include <utility>
#include <vector>

#include "model/backend.h"
#include "model/step_plan.h"
#include "train/backend_factory.h"

namespace tinyllama {

// Tests read the whole gradient (Model::grads), which GradBuffers::Ring
// (v3's and v4's preset) does not keep: the helpers resolve with full
// gradient buffers unless a test of the ring itself asks to keep it.
inline OpChoices with_full_gradients(OpChoices ops, bool keep_grad_ring = false) {
  if (!keep_grad_ring) ops.grad_buffers = GradBuffers::Full;
  return ops;
}

// A request resolved as a run resolves it on this backend's device: its facts
// with what a run measures there (train's run_caps: whether cuDNN runs the
// attention), and the workspaces its prepare() allocates listed.
inline StepPlan resolved_for(const Backend& backend, const PlanRequest& request,
                             const ModelConfig& cfg, BatchShape shape) {
  const DeviceCaps caps = run_caps(backend.caps(), request, cfg, shape);
  StepPlan plan = resolve_plan(request, caps, cfg, shape);
  plan.workspaces = backend_workspaces(caps.kind, cfg, shape, plan);
  return plan;
}

// The plan a GPU test runs is the one a training run would; `pins` asks for
// kernel families.
inline StepPlan test_plan(const std::string& level, Precision precision, const Backend& backend,
                          const ModelConfig& cfg, BatchShape shape, const KernelPins& pins = {}) {
  PlanRequest request;
  request.level = level;
  request.ops = with_full_gradients(level_preset(level));
  request.precision = precision;
  request.kernel_pins = pins;
  return resolved_for(backend, request, cfg, shape);
}

inline StepPlan test_plan(const OpChoices& ops, Precision precision, const Backend& backend,
                          const ModelConfig& cfg, BatchShape shape, bool keep_grad_ring = false,
                          const KernelPins& pins = {}) {
  PlanRequest request;
  request.level = "custom";
  request.ops = with_full_gradients(ops, keep_grad_ring);
  request.precision = precision;
  request.kernel_pins = pins;
  return resolved_for(backend, request, cfg, shape);
}

// The CPU backend's caps, but as a device that captures with parallel
// branches: plans resolved with them keep Graph and FusedPerLayer, whose
// passes the CPU backend runs in order (its side GEMMs and side sweeps run at
// once). Model tests reach those code paths with it; a StepRunner cannot
// capture on the CPU backend (tests/train/fake_graph_backend.h can).
inline DeviceCaps graph_capable_cpu_caps() {
  DeviceCaps caps = DeviceCaps::cpu();
  caps.graphs = true;
  caps.parallel_branches = true;
  return caps;
}

inline StepPlan graph_plan(const OpChoices& ops, Precision precision, const ModelConfig& cfg,
                           BatchShape shape, bool keep_grad_ring = false) {
  return plan_for_choices(with_full_gradients(ops, keep_grad_ring), precision,
                          graph_capable_cpu_caps(), cfg, shape);
}

// "qkv_gemm=fused attention=flash ...": a choice set for test messages.
inline std::string named_summary(const OpChoices& ops) {
  std::string out;
  for (const NamedChoice& c : named_choices(ops)) {
    out += (out.empty() ? "" : " ") + std::string(c.op) + "=" + c.impl;
  }
  return out;
}

// A variant's name for test output: "v2", "v2 attention=materialized".
struct PlanVariant {
  std::string name;
  OpChoices ops;
};

// Every implemented level, then every single change of each, without repeats
// (v1 with qkv fused and v2 with qkv separate are different variants).
inline std::vector<PlanVariant> level_variants() {
  std::vector<PlanVariant> out;
  auto seen = [&](const OpChoices& ops) {
    for (const PlanVariant& v : out) {
      if (v.ops == ops) return true;
    }
    return false;
  };
  for (const std::string& level : implemented_levels()) {
    out.push_back({level, level_preset(level)});
  }
  for (const std::string& level : implemented_levels()) {
    const OpChoices preset = level_preset(level);
    for (const OpChoices& ops : single_changes(preset)) {
      if (seen(ops)) continue;
      std::string change;
      const auto a = named_choices(preset);
      const auto b = named_choices(ops);
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::string(a[i].impl) != b[i].impl) change = std::string(b[i].op) + "=" + b[i].impl;
      }
      out.push_back({level + " " + change, ops});
    }
  }
  return out;
}

}  // namespace tinyllama
