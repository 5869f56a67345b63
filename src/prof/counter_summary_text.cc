// The printed counter lines and the roofline drawing's points, both made
// from summary.json's "counters" section (counter_summary.h), so that the
// file, the text and the SVG never disagree.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "prof/counter_summary.h"

namespace tinyllama::prof {
namespace {

using json = nlohmann::json;

double num(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

RooflinePoint point_from(const std::string& name, const json& p) {
  RooflinePoint r;
  r.name = name;
  if (!p.is_object()) return r;
  r.placed = true;
  r.intensity = num(p, "intensity");
  r.achieved_tflops = num(p, "achieved_tflops");
  r.roof_tflops = num(p, "roof_tflops");
  r.memory_bound = p.value("bound", "") == "memory";
  r.pct_of_roof = num(p, "pct_of_roof");
  return r;
}

std::string short_name(const std::string& name, std::size_t width) {
  return name.size() <= width ? name : name.substr(0, width - 3) + "...";
}

std::string pct(const json& counters, const char* label) {
  const double v = num(counters, label);
  char text[16];
  if (std::isnan(v)) return "   n/a";
  std::snprintf(text, sizeof text, "%5.1f%%", v);
  return text;
}

std::string placement_text(const json& p) {
  if (!p.is_object()) return "       -      -        -";
  char text[64];
  std::snprintf(text, sizeof text, "%8.3g %6.3g %-7s %4.0f%%", num(p, "achieved_tflops"),
                num(p, "intensity"), p.value("bound", "").c_str(), num(p, "pct_of_roof"));
  return text;
}

// What the replay adds to each kernel's DRAM bytes, and that it is out.
std::string replay_baseline_line(const json& c) {
  const json& b = c.value("replay_baseline", json());
  if (!b.is_object() || b.value("launches", 0) == 0) {
    return "            DRAM bytes as read: the replay's own write-back could not be measured\n";
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "            DRAM bytes net of the replay's own traffic (an empty kernel read "
                "%.3g MB + %.3g MB written a launch)\n",
                num(b, "dram_read_bytes") / 1e6, num(b, "dram_write_bytes") / 1e6);
  return line;
}

// Where the DRAM bytes come from: the DRAM pass, or the replayed passes.
std::string dram_pass_line(const json& c) {
  const std::size_t passes = c.value("dram_passes", std::size_t{0});
  if (passes == 0) {
    const std::string why = c.value("dram_note", std::string());
    return "            DRAM bytes and times from the replayed passes" +
           (why.empty() ? std::string() : ": " + why) + "\n";
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "            DRAM bytes and times from a step of their own (%zu pass%s%s)\n",
                passes, passes == 1 ? "" : "es", passes == 1 ? ", not replayed" : ", replayed");
  return line;
}

std::string header_lines(const json& c) {
  char line[512];
  std::snprintf(line, sizeof line,
                "  counters  %zu replay passes per kernel (%zu metrics, CUPTI range profiler); "
                "counter step %.1f ms (not timed), %zu kernels%s\n",
                c["passes"].get<std::size_t>(), c["metrics"].size(),
                c["counter_step_ms"].get<double>(), c["ranges"].get<std::size_t>(),
                c["matched"].get<bool>() ? ", matched to the profiled kernels" : "");
  std::string text = line;
  if (!c["matched"].get<bool>()) text += "            " + c["note"].get<std::string>() + "\n";
  if (!c["refused_metrics"].empty()) {
    text += "            refused by this device: " + c["refused_metrics"].dump() + "\n";
  }
  text += replay_baseline_line(c);
  text += dram_pass_line(c);
  const json& s = c["step"];
  std::snprintf(line, sizeof line,
                "            step: DRAM %.4g GB read + %.4g GB written, L2 hit%s, SM active%s, "
                "occupancy%s, tensor pipe%s, %.4g TFLOP counted\n",
                num(s, "dram_read_bytes") / 1e9, num(s, "dram_write_bytes") / 1e9,
                pct(s, "l2_hit_pct").c_str(), pct(s, "sm_active_pct").c_str(),
                pct(s, "occupancy_pct").c_str(), pct(s, "tensor_active_pct").c_str(),
                num(s, "flops") / 1e12);
  return text + line;
}

std::string kernel_lines(const json& c) {
  if (c["top_kernels"].empty()) return "";
  std::string text =
      "  top kernels with counters (rates over the profiled steps' time):\n"
      "     #  ms/step  DRAM GB/s  L2 hit  SM act  occup.  tensor  TFLOP/s FLOP/B bound   "
      "roof  name\n";
  char line[512];
  for (const json& k : c["top_kernels"]) {
    const json& n = k["counters"];
    std::snprintf(line, sizeof line, "    %2d %8.3f %10.1f  %s  %s  %s  %s  %s  %s\n",
                  k["rank"].get<int>(), k["ms_per_step"].get<double>(),
                  k["dram_gbps"].get<double>(), pct(n, "l2_hit_pct").c_str(),
                  pct(n, "sm_active_pct").c_str(), pct(n, "occupancy_pct").c_str(),
                  pct(n, "tensor_active_pct").c_str(), placement_text(k["roofline"]).c_str(),
                  short_name(k["name"].get<std::string>(), 60).c_str());
    text += line;
  }
  return text;
}

std::string op_lines(const json& c) {
  if (c["ops"].empty()) return "";
  std::string text =
      "  ops with counters against the cost model (measured | model placement; read MB: the "
      "replayed passes', every input from DRAM as the model counts):\n"
      "    op                            ms/step   read MB    model  ratio  write MB    model  "
      "ratio  TFLOP/s FLOP/B bound   roof | FLOP/B model\n";
  char line[512];
  for (const json& o : c["ops"]) {
    const json& model = o["model"];
    std::snprintf(
        line, sizeof line, "    %-30s %7.3f %9.2f %8.2f %6.2f %9.2f %8.2f %6.2f %s | %6.3g\n",
        short_name(o["op"].get<std::string>(), 30).c_str(), o["ms_per_step"].get<double>(),
        num(o, "dram_read_replayed_bytes") / 1e6, num(o, "model_read_bytes") / 1e6,
        num(o, "reads_over_model"), num(o, "dram_write_bytes") / 1e6,
        num(o, "model_write_bytes") / 1e6, num(o, "writes_over_model"),
        placement_text(o["measured"]).c_str(), model.is_object() ? num(model, "intensity") : NAN);
    text += line;
  }
  const json w = c.value("step_writes", json::object());
  std::snprintf(line, sizeof line,
                "    writes over the step (L2 holds some past their op's end): %.2f MB against "
                "the model's %.2f MB, %.2f\n",
                num(w, "dram_write_bytes") / 1e6, num(w, "model_write_bytes") / 1e6,
                num(w, "ratio"));
  return text + line;
}

std::string differ_lines(const json& c) {
  if (c["dram_bytes_differ"].empty()) return "";
  char pct_text[16];
  std::snprintf(pct_text, sizeof pct_text, "%.0f", kDramBytesTolerance * 100);
  std::string text =
      "  DRAM reads differ from the cost model by more than " + std::string(pct_text) + " %:";
  char item[160];
  for (const json& d : c["dram_bytes_differ"]) {
    std::snprintf(item, sizeof item, " %s (%.2fx)", d["op"].get<std::string>().c_str(),
                  d["ratio"].get<double>());
    text += item;
  }
  return text + "\n";
}

}  // namespace

RooflineChart roofline_chart(const json& c, const std::string& title) {
  RooflineChart chart;
  chart.title = title;
  if (!c.value("available", false)) return chart;
  const json& r = c["roofs"];
  chart.roofs.compute_tflops = num(r, "compute_tflops");
  chart.roofs.fp32_tflops = num(r, "fp32_tflops");
  chart.roofs.bandwidth_gbps = num(r, "bandwidth_gbps");
  chart.roofs.sm_mhz = num(r, "sm_mhz");
  for (const json& o : c["ops"]) {
    const std::string name = o["op"].get<std::string>();
    chart.measured_ops.push_back(point_from(name, o["measured"]));
    chart.model_ops.push_back(point_from(name, o["model"]));
  }
  for (const json& k : c["top_kernels"]) {
    chart.kernels.push_back(
        point_from("#" + std::to_string(k["rank"].get<int>()) + " " + k["name"].get<std::string>(),
                   k["roofline"]));
  }
  return chart;
}

std::string format_counter_summary(const json& c) {
  if (!c.value("available", false)) return "  counters  " + c.value("note", "") + "\n";
  return header_lines(c) + kernel_lines(c) + op_lines(c) + differ_lines(c);
}

}  // namespace tinyllama::prof
