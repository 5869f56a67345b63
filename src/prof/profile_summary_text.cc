// The printed profile summary, made from summary.json's object (so the
// text and the file never disagree): the step time and overhead, the GPU's
// dispatches and top kernels, per-op rates, MFU and memory.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "prof/profile_summary.h"

namespace tinyllama::prof {

using json = nlohmann::json;

namespace {

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string num(const json& v, const char* fmt) {
  return v.is_number() ? format(fmt, v.get<double>()) : std::string("-");
}

std::string mb(const json& v) {
  return v.is_number() ? format("%.1f MB", v.get<double>() / 1e6) : std::string("unknown");
}

// 5.28e9 -> "5.28 G": FLOP counts span kFLOP (tests) to PFLOP (big models).
std::string si(const json& v) {
  if (!v.is_number()) return "- ";
  double x = v.get<double>();
  const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(x) >= 1000 && i < 6) {
    x /= 1000;
    ++i;
  }
  return format("%.3g ", x) + prefixes[i];
}

std::string shorten(const std::string& s, std::size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string lpad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

// "auto chose cudnn: cudnn 0.412 ms, flash 0.631 ms per layer (fwd+bwd)".
std::string attention_auto_line(const json& a) {
  std::string out = "auto chose " + a["chosen"].get<std::string>();
  // A resumed run's choice is its checkpoint's (older summaries lack the key).
  if (a.contains("reused_from") && a["reused_from"].is_string()) {
    out += " (as in " + a["reused_from"].get<std::string>() + ", not timed again)";
  }
  std::string times;
  for (const char* impl : {"cudnn", "flash"}) {
    if (!a[impl].is_object()) continue;
    times += (times.empty() ? "" : ", ") + std::string(impl) + " " +
             num(a[impl]["total_ms"], "%.3f") + " ms";
  }
  if (!times.empty()) out += ": " + times + " per layer (fwd+bwd)";
  for (const json& n : a["notes"]) out += "; " + n.get<std::string>();
  return out;
}

// The NCCL kernels' time per step and its hidden share, then per op; nothing
// for a run without them.
std::string communication_lines(const json& c) {
  if (!c.is_object() || !(c["kernels_per_step"].get<double>() > 0)) return "";
  auto hidden = [](const json& t) {
    return num(t["hidden_ms_per_step"], "%.3f") + " ms (" + num(t["hidden_pct"], "%.1f") +
           " %) hidden behind compute";
  };
  std::string out = "  comm      " + num(c["kernels_per_step"], "%.0f") + " NCCL kernels/step, " +
                    num(c["ms_per_step"], "%.3f") + " ms/step, " + hidden(c) + "\n";
  for (const json& o : c["ops"]) {
    out += "            " + pad(shorten(o["op"].get<std::string>(), 32), 32) +
           lpad(num(o["kernels_per_step"], "%.0f"), 5) + " kernels" +
           lpad(num(o["ms_per_step"], "%.3f"), 9) + " ms, " + hidden(o) + "\n";
  }
  return out;
}

}  // namespace

std::string format_clocks(const json& c, const std::string& label) {
  if (c.contains("note")) return label + "not sampled: " + c["note"].get<std::string>() + "\n";
  const std::string indent(label.size(), ' ');
  std::string out = label + "SM " + format("%.0f", c["sm_mhz_median"].get<double>()) +
                    " MHz median (" + format("%.0f", c["sm_mhz_min"].get<double>()) + "-" +
                    format("%.0f", c["sm_mhz_max"].get<double>()) + ")";
  if (c["device_max_sm_mhz"].is_number()) {
    const double max = c["device_max_sm_mhz"].get<double>();
    out += " of the GPU's " + format("%.0f", max) + " MHz (" +
           format("%.0f", 100.0 * c["sm_mhz_median"].get<double>() / max) + " %)";
  }
  out += ", power " + format("%.0f", c["power_w_median"].get<double>()) + " W median";
  if (c["power_limit_w"].is_number()) {
    out += " of its " + format("%.0f", c["power_limit_w"].get<double>()) + " W limit";
  }
  out += "; " + std::to_string(c["samples"].get<int>()) + " samples while busy\n";
  std::string held;
  for (const auto& [name, pct] : c["reasons_pct"].items()) {
    if (pct.get<double>() <= 0) continue;
    held += (held.empty() ? "" : ", ") + name + " in " + format("%.0f", pct.get<double>()) + " %";
  }
  out += held.empty() ? indent + "nothing held the clock down in any sample\n"
                      : indent + "clock held down by: " + held +
                            " of the samples (the peak FLOP/s assume the full clock)\n";
  return out;
}

namespace {

std::string header_lines(const json& j) {
  std::string out = "profile: " + std::to_string(j["profiled_steps"].get<int>()) + " steps, " +
                    j["level"].get<std::string>() + ", " + j["precision"].get<std::string>() +
                    ", " + j["device"].get<std::string>() + "\n";
  if (j.contains("plan") && j["plan"].contains("attention_auto")) {
    out += "  attention " + attention_auto_line(j["plan"]["attention_auto"]) + "\n";
  }
  return out;
}

std::string step_line(const json& st) {
  std::string out = "  step      " + num(st["profiled_ms_per_step"], "%.3f") + " ms profiled";
  if (st["unprofiled_ms_per_step"].is_number()) {
    out += ", " + num(st["unprofiled_ms_per_step"], "%.3f") + " ms unprofiled (overhead " +
           num(st["profiling_overhead_pct"], "%+.1f") + " %)";
  }
  return out + "\n";
}

std::string gpu_line(const json& g) {
  if (!g.is_object()) return "  gpu       kernel statistics need a GPU (see the notes)\n";
  return "  gpu       " + num(g["kernel_dispatches_per_step"], "%.0f") +
         " kernel dispatches/step (" + num(g["launch_calls_per_step"], "%.0f") +
         " launch calls), " + std::to_string(g["unique_kernels"].get<int>()) + " unique kernels, " +
         num(g["gpu_time_per_step_ms"], "%.3f") + " ms GPU time/step, busy " +
         num(g["gpu_busy_pct"], "%.1f") + " % of the step\n";
}

// The FLOPs and MFU, the clocks, and the MFU at the clock held.
std::string flops_lines(const json& j) {
  const json& f = j["flops"];
  const json& mfu = j["mfu"];
  const json achieved = mfu["achieved_tflops"].get<double>() * 1e12;
  std::string out = "  flops     " + si(f["model_flops_per_step"]) +
                    "FLOP/step of model work (6NT " + si(f["six_n_t"]) + " + attention " +
                    si(f["attention_term"]) + "), " + si(achieved) + "FLOP/s at the run's " +
                    num(j["step_time"]["run_ms_per_step"], "%.3f") + " ms/step";
  if (mfu["value"].is_number()) {
    out += ", MFU " + format("%.1f", 100.0 * mfu["value"].get<double>()) + " % of " +
           num(mfu["peak_tflops"], "%.0f") + " TFLOP/s (" +
           j["device_peak"]["name"].get<std::string>() + ")";
  }
  out += "\n";
  if (j.contains("clocks")) out += format_clocks(j["clocks"], "  clocks    ");
  if (mfu.contains("at_held_clock")) {
    const json& h = mfu["at_held_clock"];
    out += "            at the median " + num(h["sm_mhz"], "%.0f") + " MHz the peak is " +
           num(h["peak_tflops"], "%.0f") + " TFLOP/s (" + num(mfu["peak_tflops"], "%.0f") +
           " at the datasheet's " + num(h["rated_sm_mhz"], "%.0f") + " MHz): MFU " +
           format("%.1f", 100.0 * h["value"].get<double>()) + " % of it\n";
  }
  return out;
}

std::string top_kernel_lines(const json& g) {
  if (!g.is_object() || g["top_kernels"].empty()) return "";
  std::string out = "  top kernels      share  calls/step    ms/step  name\n";
  for (const json& k : g["top_kernels"]) {
    out += "            " + lpad(num(k["share_pct"], "%.1f %%"), 9) +
           lpad(num(k["calls_per_step"], "%.0f"), 12) + lpad(num(k["ms_per_step"], "%.3f"), 11) +
           "  " + shorten(k["name"].get<std::string>(), 80) + "\n";
  }
  return out;
}

std::string op_line(const json& o) {
  const json gflop = o["flops_per_step"].is_number() ? json(o["flops_per_step"].get<double>() / 1e9)
                                                     : json(nullptr);
  const json mbytes = o["bytes_per_step"].is_number()
                          ? json(o["bytes_per_step"].get<double>() / 1e6)
                          : json(nullptr);
  return "    " + pad(shorten(o["op"].get<std::string>(), 32), 32) +
         lpad(num(o["time_ms_per_step"], "%.3f"), 9) + lpad(num(o["kernels_per_step"], "%.4g"), 8) +
         lpad(num(gflop, "%.3g"), 10) + lpad(num(mbytes, "%.3g"), 10) +
         lpad(num(o["achieved_tflops"], "%.3g"), 9) + lpad(num(o["achieved_gbps"], "%.4g"), 9) +
         lpad(num(o["arithmetic_intensity"], "%.1f"), 8) + lpad(num(o["pct_of_roof"], "%.0f"), 8) +
         "  " + pad(o["bound"].is_string() ? o["bound"].get<std::string>() : std::string("-"), 7) +
         lpad(num(o["beside_other_streams_pct"], "%.0f"), 8) + "\n";
}

// Ops by time, the slowest first; the JSON keeps the pass order.
std::string op_table(const json& j) {
  std::vector<json> ops;
  for (const json& o : j["ops"]) {
    if (o["time_ms_per_step"].is_number()) ops.push_back(o);
  }
  std::stable_sort(ops.begin(), ops.end(), [](const json& a, const json& b) {
    return a["time_ms_per_step"].get<double>() > b["time_ms_per_step"].get<double>();
  });
  if (ops.empty()) return "";
  const std::string source = j["op_time_source"] == "gpu_kernels" ? "GPU kernel" : "host";
  std::string out =
      "  ops (" + source + " time per step, slowest first; kernels: the kernels it ran per step)\n";
  out += "    " + pad("op", 32) + lpad("ms", 9) + lpad("kernels", 8) + lpad("GFLOP", 10) +
         lpad("MB", 10) + lpad("TFLOP/s", 9) + lpad("GB/s", 9) + lpad("FLOP/B", 8) +
         lpad("roof %", 8) + "  bound  " + lpad("beside %", 8) + "\n";
  for (std::size_t i = 0; i < ops.size() && i < 20; ++i) out += op_line(ops[i]);
  if (ops.size() > 20) {
    out += "    ... " + std::to_string(ops.size() - 20) + " more in summary.json\n";
  }
  return out;
}

std::string memory_line(const json& m) {
  std::string out = "  memory    parameters " + mb(m["parameters_bytes"]) + ", gradients " +
                    mb(m["gradients_bytes"]) + ", optimizer " + mb(m["optimizer_bytes"]) +
                    ", activations " + mb(m["activations_bytes"]) + ", workspaces " +
                    mb(m["workspace_bytes"]) + "; total " + mb(m["total_bytes"]);
  if (m["device_total_bytes"].is_number()) out += " of " + mb(m["device_total_bytes"]) + " device";
  if (m["device_used_peak_bytes"].is_number()) {
    out += " (driver peak " + mb(m["device_used_peak_bytes"]) + ")";
  }
  return out + "\n";
}

}  // namespace

std::string format_profile_summary(const json& j) {
  std::string out = header_lines(j);
  out += step_line(j["step_time"]);
  const json& g = j["gpu"];
  out += gpu_line(g);
  if (j.contains("communication")) out += communication_lines(j["communication"]);
  out += flops_lines(j);
  out += top_kernel_lines(g);
  out += op_table(j);
  out += memory_line(j["memory"]);
  for (const json& n : j["notes"]) out += "  note: " + n.get<std::string>() + "\n";
  return out;
}

}  // namespace tinyllama::prof
