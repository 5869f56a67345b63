#include "prof/update_cost.h"

#include <utility>
#include <vector>

#include "model/grad_layout.h"
#include "model/param_layout.h"

namespace tinyllama::prof {
namespace {

OpCost elementwise_op(const char* phase, const char* op, std::int64_t flops, std::int64_t bytes) {
  OpCost c;
  c.phase = phase;
  c.op = op;
  c.path = std::string(phase) + "/" + op;
  c.kind = OpKind::Elementwise;
  c.flops = flops;
  c.bytes = bytes;
  return c;
}

}  // namespace

void add_update_recipe_cost(StepCost& sc, const ModelConfig& cfg, const StepPlan& plan) {
  const UpdateRecipe& u = plan.update;
  if (!u.accumulates() && !u.needs_norm()) return;
  const ParamLayout layout(cfg, plan.parallel.span_align());
  const auto m = static_cast<std::int64_t>(dtype_size(plan.precision.master));
  const std::int64_t n = GradLayout(layout, plan.ops.grad_buffers).total();
  const std::int64_t k = u.accumulation;
  std::vector<OpCost> ops;
  for (OpCost c : sc.ops) {
    if (c.phase == "optimizer" && (ops.empty() || ops.back().phase != "optimizer")) {
      if (u.accumulates()) {
        ops.push_back(
            elementwise_op("backward", "grad_accumulate", n * (k - 1), n * m * (2 + 3 * (k - 1))));
      }
      if (u.needs_norm()) ops.push_back(elementwise_op("optimizer", "grad_norm", 2 * n, n * m));
    }
    if (c.phase != "optimizer" && c.op != "overflow_check") {
      c.flops *= k;
      c.bytes *= k;
    }
    ops.push_back(std::move(c));
  }
  sc.ops = std::move(ops);
  sc.tokens *= k;
}

}  // namespace tinyllama::prof
