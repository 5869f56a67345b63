#include "train/memory_check.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "cuda/cuda_entry.h"

namespace tinyllama {

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  char text[48];
  if (b >= 1e9) {
    std::snprintf(text, sizeof text, "%.1f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.1f KB", b / 1e3);
  }
  return text;
}

std::int64_t parse_meminfo_available(std::istream& meminfo) {
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    std::int64_t value = 0;
    if (fields >> key >> value && key == "MemAvailable:") {
      fields >> unit;
      return unit == "kB" ? value * 1024 : value;
    }
  }
  return -1;
}

std::int64_t available_memory_bytes(DeviceKind device) {
  if (device == DeviceKind::Cuda) {
    std::size_t free_bytes = 0, total_bytes = 0;
    if (!cuda_memory_info(&free_bytes, &total_bytes)) return -1;
    return static_cast<std::int64_t>(free_bytes);
  }
  std::ifstream meminfo("/proc/meminfo");
  return meminfo ? parse_meminfo_available(meminfo) : -1;
}

void check_memory_fits(const MemoryBreakdown& need, std::int64_t available, DeviceKind device) {
  if (available < 0 || need.total() <= available) return;
  const std::string where =
      device == DeviceKind::Cuda
          ? "the cuda device has " + format_bytes(available) + " free"
          : "the cpu has " + format_bytes(available) + " available (MemAvailable)";
  throw RuntimeFailure(
      "run needs " + format_bytes(need.total()) + " (parameters " + format_bytes(need.parameters) +
      ", gradients " + format_bytes(need.gradients) + ", optimizer " +
      format_bytes(need.optimizer) + ", activations " + format_bytes(need.activations) +
      ", workspaces " + format_bytes(need.workspaces) + ") but " + where);
}

void check_memory(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) {
  check_memory_fits(Model::estimate_memory(cfg, shape, plan), available_memory_bytes(plan.device),
                    plan.device);
}

}  // namespace tinyllama
