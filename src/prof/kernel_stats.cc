#include "prof/kernel_stats.h"

#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace tinyllama::prof {

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string result = status == 0 && out != nullptr ? std::string(out) : name;
  std::free(out);
  return result;
}

std::vector<KernelStat> kernel_stats(const std::vector<KernelRecord>& kernels) {
  // Demangle each distinct raw name once: a step repeats a few dozen names
  // thousands of times.
  std::map<std::string, std::string> readable;
  std::map<std::string, KernelStat> by_name;
  std::int64_t all = 0;
  for (const KernelRecord& k : kernels) {
    auto it = readable.find(k.name);
    if (it == readable.end()) it = readable.emplace(k.name, demangle(k.name)).first;
    KernelStat& s = by_name[it->second];
    const std::int64_t d = k.duration_ns();
    if (s.calls == 0) {
      s.name = it->second;
      s.min_ns = d;
      s.max_ns = d;
    }
    ++s.calls;
    s.total_ns += d;
    s.min_ns = std::min(s.min_ns, d);
    s.max_ns = std::max(s.max_ns, d);
    all += d;
  }
  std::vector<KernelStat> stats;
  stats.reserve(by_name.size());
  for (auto& [name, s] : by_name) {
    s.percentage = all > 0 ? 100.0 * static_cast<double>(s.total_ns) / static_cast<double>(all) : 0;
    stats.push_back(std::move(s));
  }
  std::stable_sort(stats.begin(), stats.end(), [](const KernelStat& a, const KernelStat& b) {
    return a.total_ns > b.total_ns;  // by_name already ordered ties by name
  });
  return stats;
}

namespace {

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';  // CSV escapes a quote by doubling it
    q += c;
  }
  return q + "\"";
}

// The counter columns' header, and one kernel's values (empty when none).
constexpr const char* kCounterHeader =
    ",CounterLaunches,DramReadBytes,DramWriteBytes,DramGBps,L2HitPct,SmActivePct,OccupancyPct,"
    "TensorActivePct,Flops,TensorFlops,FlopsPerByte,AchievedTflops";

std::string counter_columns(const CounterSum* c, double seconds_per_step) {
  if (c == nullptr) return ",,,,,,,,,,,,";
  auto field = [](double v) {
    if (std::isnan(v)) return std::string(",");
    char text[40];
    std::snprintf(text, sizeof text, ",%.6g", v);
    return std::string(text);
  };
  const double rate_s = seconds_per_step > 0 ? seconds_per_step : NAN;
  return field(static_cast<double>(c->launches)) + field(c->get(Metric::DramRead)) +
         field(c->get(Metric::DramWrite)) + field(c->dram_bytes() / rate_s / 1e9) +
         field(c->get(Metric::L2HitRate)) + field(c->get(Metric::SmActive)) +
         field(c->get(Metric::WarpsActive)) + field(c->get(Metric::TensorActive)) +
         field(c->flops()) + field(c->tensor_flops()) + field(c->intensity()) +
         field(c->flops() / rate_s / 1e12);
}

}  // namespace

std::string kernel_stats_csv(const std::vector<KernelStat>& stats,
                             const std::map<std::string, CounterSum>* counters, double steps) {
  std::string csv = "Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs";
  csv += counters != nullptr ? std::string(kCounterHeader) + "\n" : std::string("\n");
  char numbers[160];
  for (const KernelStat& s : stats) {
    std::snprintf(numbers, sizeof numbers, ",%lld,%lld,%.3f,%.4f,%lld,%lld",
                  static_cast<long long>(s.calls), static_cast<long long>(s.total_ns),
                  s.average_ns(), s.percentage, static_cast<long long>(s.min_ns),
                  static_cast<long long>(s.max_ns));
    csv += quoted(s.name) + numbers;
    if (counters != nullptr) {
      const auto it = counters->find(s.name);
      csv += counter_columns(it != counters->end() ? &it->second : nullptr,
                             static_cast<double>(s.total_ns) / steps / 1e9);
    }
    csv += "\n";
  }
  return csv;
}

std::string counter_launches_csv(const std::vector<LaunchCounters>& launches) {
  std::string csv = "Index,Kernel,Op";
  for (const MetricInfo& m : metric_table()) csv += std::string(",") + m.label;
  csv += "\n";
  for (std::size_t i = 0; i < launches.size(); ++i) {
    csv += std::to_string(i) + "," + quoted(launches[i].kernel) + "," + quoted(launches[i].op);
    for (double v : launches[i].values) {
      char cell[32] = "";
      if (!std::isnan(v)) std::snprintf(cell, sizeof cell, "%.17g", v);
      csv += std::string(",") + cell;
    }
    csv += "\n";
  }
  return csv;
}

}  // namespace tinyllama::prof
