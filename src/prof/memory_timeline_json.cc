#include "prof/memory_timeline_json.h"

#include <nlohmann/json.hpp>

namespace tinyllama::prof {
namespace {

nlohmann::json buffer_json(const TimelineBuffer& b) {
  nlohmann::json lifetimes = nlohmann::json::array();
  for (const auto& [first, last] : b.lifetimes) lifetimes.push_back({first, last});
  return {{"name", b.name},
          {"kind", b.kind},
          {"bytes", b.bytes},
          {"offset_bytes", b.offset >= 0 ? nlohmann::json(b.offset) : nlohmann::json(nullptr)},
          {"first_op", b.first_op()},
          {"last_op", b.last_op()},
          {"lifetimes", lifetimes}};
}

nlohmann::json by_kind_json(const std::vector<std::string>& kinds,
                            const std::vector<std::int64_t>& bytes) {
  nlohmann::json out = nlohmann::json::object();
  for (std::size_t k = 0; k < kinds.size(); ++k) out[kinds[k]] = bytes[k];
  return out;
}

}  // namespace

nlohmann::json activation_breakdown_json(const MemoryTimeline& tl) {
  const std::vector<std::string> kinds = tl.kinds();
  std::vector<std::int64_t> bytes(kinds.size(), 0);
  std::int64_t total = 0;
  nlohmann::json buffers = nlohmann::json::array();
  for (const TimelineBuffer& b : tl.buffers) {
    for (std::size_t k = 0; k < kinds.size(); ++k) bytes[k] += kinds[k] == b.kind ? b.bytes : 0;
    total += b.bytes;
    buffers.push_back(buffer_json(b));
  }
  nlohmann::json ops = nlohmann::json::array();
  for (const TimelineOp& op : tl.ops) ops.push_back(op.name);
  // The scratch over the logits is in two kinds' bytes, once in the total.
  return {{"activations_bytes", total - tl.shared_bytes},
          {"shared_bytes", tl.shared_bytes},
          {"by_kind", by_kind_json(kinds, bytes)},
          {"buffers", buffers},
          {"ops", ops}};
}

nlohmann::json memory_timeline_json(const MemoryTimeline& tl,
                                    const std::vector<DriverSample>& samples,
                                    const std::string& driver_note) {
  const std::vector<std::string> kinds = tl.kinds();
  nlohmann::json buffers = nlohmann::json::array();
  for (const TimelineBuffer& b : tl.buffers) buffers.push_back(buffer_json(b));
  nlohmann::json ops = nlohmann::json::array();
  for (int i = 0; i < static_cast<int>(tl.ops.size()); ++i) {
    const TimelineOp& op = tl.ops[static_cast<std::size_t>(i)];
    nlohmann::json live = nlohmann::json::array();
    for (std::size_t b = 0; b < tl.buffers.size(); ++b) {
      if (tl.buffers[b].live_at(i)) live.push_back(b);
    }
    ops.push_back({{"index", i},
                   {"name", op.name},
                   {"phase", op.phase},
                   {"live_bytes", op.live_bytes},
                   {"live_by_kind", by_kind_json(kinds, tl.live_by_kind(i))},
                   {"live_buffers", live}});
  }
  nlohmann::json driver = nullptr;
  if (!samples.empty()) {
    driver = nlohmann::json::array();
    for (const DriverSample& s : samples) {
      driver.push_back({{"point", s.point}, {"used_bytes", s.used_bytes}});
    }
  }
  const MemoryBreakdown& m = tl.allocated;
  const std::int64_t token_bytes = m.activations - tl.arena_bytes;
  const TimelineOp* peak =
      tl.peak_op >= 0 ? &tl.ops[static_cast<std::size_t>(tl.peak_op)] : nullptr;
  return {
      {"allocated",
       {{"parameters_bytes", m.parameters},
        {"gradients_bytes", m.gradients},
        {"optimizer_bytes", m.optimizer},
        {"workspace_bytes", m.workspaces},
        {"arena_bytes", tl.arena_bytes},
        {"token_bytes", token_bytes},
        {"total_bytes", m.total()}}},
      {"persistent_bytes", m.parameters + m.gradients + m.optimizer + m.workspaces},
      {"arena_bytes", tl.arena_bytes},
      {"shared_bytes", tl.shared_bytes},
      {"peak",
       {{"op_index", tl.peak_op},
        {"op", peak != nullptr ? nlohmann::json(peak->name) : nlohmann::json(nullptr)},
        {"live_bytes", tl.peak_live_bytes},
        {"live_by_kind", tl.peak_op >= 0 ? by_kind_json(kinds, tl.live_by_kind(tl.peak_op))
                                         : nlohmann::json(nullptr)}}},
      {"kinds", kinds},
      {"buffers", buffers},
      {"ops", ops},
      {"driver_samples", driver},
      {"driver_note", driver_note},
  };
}

}  // namespace tinyllama::prof
