#include "model/compute_copy.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace tinyllama {
namespace {

// The slots of the linears plan.fp8 gives no bf16 copy.
std::vector<bool> kept_slots(const ParamLayout& layout, const StepPlan& plan) {
  std::vector<bool> keeps(layout.slots().size(), plan.precision.mixed());
  if (!plan.precision.mixed()) return keeps;
  const std::pair<LinearKind, int LayerSlots::*> linears[] = {
      {LinearKind::Qkv, &LayerSlots::wqkv},
      {LinearKind::OutProj, &LayerSlots::wo},
      {LinearKind::GateUp, &LayerSlots::wgu},
      {LinearKind::Down, &LayerSlots::wdown}};
  for (const auto& [kind, which] : linears) {
    if (plan.fp8.keeps_bf16_weight(kind)) continue;
    for (int l = 0; l < layout.config().num_layers; ++l) {
      keeps[static_cast<std::size_t>(&layout.layer(l, which) - layout.slots().data())] = false;
    }
  }
  return keeps;
}

}  // namespace

ComputeCopyLayout::ComputeCopyLayout(const ParamLayout& layout, std::vector<bool> keeps)
    : layout_(&layout), keeps_(std::move(keeps)) {
  if (keeps_.size() != layout.slots().size()) {
    throw std::invalid_argument("ComputeCopyLayout: " + std::to_string(keeps_.size()) +
                                " flags for " + std::to_string(layout.slots().size()) + " slots");
  }
  runs_ = slot_runs(layout, {0, layout.total()}, [&](std::size_t i) { return keeps_[i] ? 1 : 0; });
  for (const SlotRun& r : runs_) {
    run_copy_.push_back(total_);
    if (r.group == 1) total_ += r.span.size();
  }
}

ComputeCopyLayout::ComputeCopyLayout(const ParamLayout& layout, const StepPlan& plan)
    : ComputeCopyLayout(layout, kept_slots(layout, plan)) {}

const SlotRun& ComputeCopyLayout::run_at(std::int64_t offset) const {
  const auto it = std::upper_bound(runs_.begin(), runs_.end(), offset,
                                   [](std::int64_t o, const SlotRun& r) { return o < r.span.end; });
  if (it == runs_.end() || offset < it->span.begin) {
    throw std::out_of_range("ComputeCopyLayout: offset " + std::to_string(offset) +
                            " is outside the parameters");
  }
  return *it;
}

bool ComputeCopyLayout::keeps(std::int64_t offset) const {
  return run_at(offset).group == 1;
}

std::int64_t ComputeCopyLayout::offset(std::int64_t offset) const {
  const SlotRun& r = run_at(offset);
  if (r.group != 1) {
    throw std::logic_error("ComputeCopyLayout: the parameter at " + std::to_string(offset) +
                           " has no compute copy");
  }
  return run_copy_[static_cast<std::size_t>(&r - runs_.data())] + (offset - r.span.begin);
}

std::vector<SlotRun> ComputeCopyLayout::runs(ParamSpan range) const {
  return slot_runs(*layout_, range, [&](std::size_t i) { return keeps_[i] ? 1 : 0; });
}

}  // namespace tinyllama
