#include "prof/kernel_explain.h"

#include <cmath>
#include <cstdio>

namespace tinyllama::prof {
namespace {

std::string value_text(const MetricInfo& m, double v) {
  char text[64];
  if (std::isnan(v)) return "n/a";
  if (m.percentage) {
    std::snprintf(text, sizeof text, "%.2f %%", v);
  } else if (std::string(m.unit) == "bytes") {
    std::snprintf(text, sizeof text, "%.6g MB", v / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.6g %s", v, m.unit);
  }
  return text;
}

// Where the kernel sits and what that says, in one or two lines.
std::string verdict(const KernelExplainInput& in, const RooflinePoint& p) {
  if (!p.placed) return "  roofline: not placed (no FLOPs counted, or no DRAM bytes)\n";
  char line[320];
  if (!in.roofs.known()) {
    std::snprintf(line, sizeof line,
                  "  roofline: %.3g FLOPs/byte at %.3g TFLOP/s (no device peaks)\n", p.intensity,
                  p.achieved_tflops);
    return line;
  }
  std::snprintf(line, sizeof line,
                "  roofline: %.3g FLOPs/byte (ridge %.3g) at %.3g TFLOP/s, %.1f %% of the %s roof "
                "above it (%.4g TFLOP/s)\n",
                p.intensity, in.roofs.ridge(), p.achieved_tflops, p.pct_of_roof,
                p.memory_bound ? "memory" : "compute", p.roof_tflops);
  std::string text = line;
  const double occupancy = in.counters.get(Metric::WarpsActive);
  const double sm = in.counters.get(Metric::SmActive);
  if (!std::isnan(sm) && sm < 50) {
    text += "  limit: the SMs sit idle half the time or more -- too few blocks or a long tail\n";
  } else if (p.pct_of_roof >= 60) {
    text += std::string("  limit: close to the ") + (p.memory_bound ? "memory" : "compute") +
            " roof; only less traffic (memory) or less work (compute) makes it faster\n";
  } else if (p.memory_bound) {
    text += "  limit: memory-bound but well below the bandwidth";
    text += !std::isnan(occupancy) && occupancy < 25 ? ": low occupancy hides too little latency\n"
                                                     : ": latency or access pattern\n";
  } else {
    text +=
        "  limit: compute-bound by intensity but below the compute roof: issue, "
        "synchronisation or pipe stalls\n";
  }
  return text;
}

}  // namespace

int find_kernel(const std::vector<KernelStat>& stats, const std::string& spec, std::string* why) {
  if (!spec.empty() && spec.size() < 10 &&
      spec.find_first_not_of("0123456789") == std::string::npos) {
    const long rank = std::stol(spec);  // < 10 digits: fits
    if (rank >= 1 && rank <= static_cast<long>(stats.size())) return static_cast<int>(rank - 1);
    *why = "--explain-kernel " + spec + ": the profiled steps ran " + std::to_string(stats.size()) +
           " distinct kernels";
    return -1;
  }
  for (std::size_t i = 0; i < stats.size(); ++i) {
    if (stats[i].name.find(spec) != std::string::npos) return static_cast<int>(i);
  }
  *why = "--explain-kernel " + spec + ": no profiled kernel's name contains it";
  return -1;
}

std::string explain_kernel(const KernelExplainInput& in) {
  char line[512];
  std::snprintf(line, sizeof line,
                "kernel #%d: %s\n  %.3g calls per step, %.4g ms per step in the profiled steps; "
                "counters over the counter step's %lld launch(es)\n",
                in.rank, in.name.c_str(), in.calls_per_step, in.profiled_ns_per_step / 1e6,
                static_cast<long long>(in.counters.launches));
  std::string text = line;
  for (const MetricInfo& m : metric_table()) {
    std::snprintf(line, sizeof line, "  %-18s %16s  %s\n  %-18s %16s  -> %s\n", m.label,
                  value_text(m, in.counters.get(m.metric)).c_str(), m.meaning, "", "", m.limit);
    text += line;
  }
  const double seconds = in.profiled_ns_per_step / 1e9;
  const RooflinePoint p =
      place_on_roofline(in.name, in.counters.flops(), in.counters.dram_bytes(), seconds, in.roofs);
  std::snprintf(line, sizeof line,
                "  derived: DRAM %.4g GB/s over the profiled time (peak %.4g); FLOPs %.4g "
                "(fp32 %.4g, tensor %.4g)\n",
                seconds > 0 ? in.counters.dram_bytes() / seconds / 1e9 : 0.0,
                in.roofs.bandwidth_gbps, in.counters.flops(), in.counters.fp32_flops(),
                in.counters.tensor_flops());
  text += line;
  return text + verdict(in, p);
}

}  // namespace tinyllama::prof
