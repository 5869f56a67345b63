#include "prof/launch_order.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>

#include "prof/attribution.h"

namespace tinyllama::prof {
namespace {

int root_of(const std::vector<HostRange>& ranges, int i) {
  while (ranges[static_cast<std::size_t>(i)].parent >= 0)
    i = ranges[static_cast<std::size_t>(i)].parent;
  return i;
}

}  // namespace

std::optional<LaunchOrder> learn_launch_order(const std::vector<HostRange>& ranges,
                                              const GpuActivity& gpu, std::string* why_not) {
  const Attribution a = attribute(ranges, &gpu);
  if (a.steps.empty()) {
    *why_not = "no warm-up step was recorded";
    return std::nullopt;
  }
  const int step = a.steps.back();
  // (correlation id, is a kernel, record index, launching range)
  std::vector<std::tuple<std::uint32_t, bool, std::size_t, int>> records;
  // Kernels and copies alike: the step's records, each with its launching range.
  auto collect = [&](const auto& recs, const std::vector<bool>& in_step,
                     const std::vector<int>& range_of, bool kernel, const char* what) {
    for (std::size_t i = 0; i < recs.size(); ++i) {
      if (!in_step[i]) continue;
      if (recs[i].graph_node != 0) {
        *why_not = kReplaysAGraph;
        return false;
      }
      const int range = range_of[i];
      if (range < 0) {
        *why_not = std::string("a ") + what + " of the warm-up step has no launch record";
        return false;
      }
      if (root_of(ranges, range) == step)
        records.emplace_back(recs[i].correlation, kernel, i, range);
    }
    return true;
  };
  if (!collect(gpu.kernels, a.kernel_in_step, a.kernel_range, true, "kernel") ||
      !collect(gpu.transfers, a.transfer_in_step, a.transfer_range, false, "copy")) {
    return std::nullopt;
  }
  if (records.empty()) {
    *why_not = "the warm-up step launched nothing";
    return std::nullopt;
  }
  std::sort(records.begin(), records.end());
  LaunchOrder order;
  order.launches.reserve(records.size());
  for (const auto& [correlation, kernel, index, range] : records) {
    LaunchOrder::Launch l;
    l.name = kernel ? gpu.kernels[index].name : gpu.transfers[index].name;
    l.kernel = kernel;
    l.range_offset = range - step;
    l.op = a.range_paths[static_cast<std::size_t>(range)];
    order.launches.push_back(std::move(l));
  }
  return order;
}

}  // namespace tinyllama::prof
