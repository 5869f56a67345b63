#include "bench/report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <vector>

#include "bench/reference.h"
#include "bench/text_table.h"
#include "core/errors.h"

namespace tinyllama::bench {
namespace {

std::string printf_string(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string format_us(double us) {
  if (!std::isfinite(us)) return "-";
  if (us < 10) return printf_string("%.2f", us);
  if (us < 1000) return printf_string("%.1f", us);
  return printf_string("%.0f", us);
}

std::string format_rate(double value) {
  if (!std::isfinite(value) || value <= 0) return "-";
  if (value < 1) return printf_string("%.3f", value);
  if (value < 100) return printf_string("%.1f", value);
  return printf_string("%.0f", value);
}

std::string format_pct(double pct) {
  if (!std::isfinite(pct)) return "-";
  return printf_string("%.0f%%", pct);
}

std::string format_err(double err) {
  return std::isfinite(err) ? printf_string("%.1e", err) : "not finite";
}

// JSON has no NaN or infinity: such figures (no roof, an unwritten
// output) are written as null.
nlohmann::json number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

std::string check_cell(const OpResult& r) {
  if (!r.checked) return "-";
  return (r.check_failed() ? "FAIL " : "ok ") + format_err(r.check.max_rel_err) +
         (r.check_failed() ? " (" + r.check.worst + ")" : "");
}

std::string precision_words(Precision p) {
  if (!p.mixed()) return precision_label(p);
  return precision_label(p) + " (fp32 master weights, gradients and optimizer state)";
}

std::string run_title(const RunResult& run) {
  return run.shape.name + " | " + precision_words(run.precision) + " | " + run.shape.describe();
}

}  // namespace

std::string format_preamble(const BenchReport& report) {
  std::string s = "kernel bench on " + report.device + "\n";
  if (report.peak) {
    const prof::DevicePeak& p = *report.peak;
    s += "roof (" + p.name + " datasheet, dense): " + format_rate(p.fp32_tflops) +
         " TFLOP/s fp32, " + format_rate(p.bf16_tflops) + " bf16, " + format_rate(p.fp16_tflops) +
         " fp16; " + format_rate(p.bandwidth_gbs) + " GB/s\n";
  } else {
    s += "roof: this device is not in the peak table (prof/device_peaks.cc): no % of roof\n";
  }
  s += "times: median and min of " + std::to_string(report.timing.repeats) + " repetitions (" +
       (report.timing.mode == TimingMode::Graph ? "recorded into one CUDA graph, launched once"
                                                : "eager launches") +
       ") after " + std::to_string(report.timing.warmup) + " warm-up call" +
       (report.timing.warmup == 1 ? "" : "s") + ", L2 warm (nothing flushed between repetitions)\n";
  s += "GB/s and TFLOP/s: the cost model's bytes and FLOPs over the median; % roof: the time at "
       "the roofline bound over the median (above 100 %: served from the L2)\n";
  return s;
}

std::string format_run(const BenchReport& report, const RunResult& run) {
  using A = TextTable::Align;
  TextTable table({{"op", A::Left},
                   {"variant", A::Left},
                   {"median µs", A::Right},
                   {"min µs", A::Right},
                   {"GB/s", A::Right},
                   {"TFLOP/s", A::Right},
                   {"% roof", A::Right},
                   {"check", A::Left}});
  std::vector<std::string> notes;
  // Scopes in first-seen order, each with the ops it applies to.
  std::vector<std::pair<std::string, std::string>> scopes;
  for (const OpResult& r : run.ops) {
    const std::string variant = r.variant.empty() ? "-" : r.variant;
    if (!r.skipped.empty()) {
      table.add_note_row({r.op, variant}, "skipped: " + r.skipped);
      continue;
    }
    if (!r.error.empty()) {
      table.add_note_row({r.op, variant}, "ERROR: " + r.error);
      continue;
    }
    table.add_row({r.op, variant, format_us(r.median_us), format_us(r.min_us),
                   format_rate(r.rates.gbs), format_rate(r.rates.tflops),
                   format_pct(r.rates.pct_of_roof), check_cell(r)});
    if (!r.timing.note.empty()) notes.push_back(r.label() + ": " + r.timing.note);
    if (r.checked) {
      auto it = std::find_if(scopes.begin(), scopes.end(),
                             [&](const auto& s) { return s.first == r.check.scope; });
      if (it == scopes.end()) {
        scopes.emplace_back(r.check.scope, r.label());
      } else {
        it->second += ", " + r.label();
      }
    }
  }
  std::string s = "\n== " + run_title(run) + "\n" + table.render();
  if (report.check && !scopes.empty()) {
    s += "checked against the CPU reference (float64), max|gpu - cpu| / max|cpu| <= " +
         printf_string("%.0e", tolerance(run.precision)) + ":\n";
    for (const auto& [scope, ops] : scopes) s += "  " + ops + ": " + scope + "\n";
  }
  for (const std::string& n : notes) s += "note: " + n + "\n";
  return s;
}

std::string format_summary(const BenchReport& report) {
  int ran = 0, skipped = 0, failed = 0;
  for (const RunResult& run : report.runs) {
    for (const OpResult& r : run.ops) {
      if (!r.skipped.empty()) {
        ++skipped;
      } else if (!r.ok()) {
        ++failed;
      } else {
        ++ran;
      }
    }
  }
  std::string s = "\nkernels: " + std::to_string(ran) + " ok";
  if (report.check) s += " (checked)";
  s += ", " + std::to_string(failed) + " failed, " + std::to_string(skipped) + " skipped\n";
  return s;
}

std::string failure_line(const BenchReport& report) {
  // The first few in full; a device error that sticks fails every op after it.
  constexpr int kListed = 5;
  std::string s;
  int n = 0;
  for (const RunResult& run : report.runs) {
    for (const OpResult& r : run.ops) {
      if (!r.skipped.empty() || r.ok()) continue;
      if (++n > kListed) continue;
      const std::string where =
          run.shape.name + " " + precision_label(run.precision) + " " + r.label();
      s += (s.empty() ? "" : "; ") + where + ": " +
           (r.error.empty() ? "max rel err " + format_err(r.check.max_rel_err) + " in " +
                                  r.check.worst + " > " + printf_string("%.0e", r.tolerance)
                            : r.error);
    }
  }
  if (n == 0) return "";
  if (n > kListed) s += "; and " + std::to_string(n - kListed) + " more (see the tables)";
  return std::to_string(n) + " kernel bench op" + (n == 1 ? "" : "s") + " failed: " + s;
}

namespace {

// One op of a run: its status, and its figures when it ran.
nlohmann::json op_json(const OpResult& o) {
  using nlohmann::json;
  json op;
  op["op"] = o.op;
  op["variant"] = o.variant;
  op["cost_path"] = o.cost_path;
  if (!o.skipped.empty()) {
    op["status"] = "skipped";
    op["reason"] = o.skipped;
    return op;
  }
  if (!o.error.empty()) {
    op["status"] = "error";
    op["reason"] = o.error;
    return op;
  }
  op["status"] = o.check_failed() ? "check_failed" : "ok";
  op["timing_mode"] = timing_mode_name(o.timing.mode);
  if (!o.timing.note.empty()) op["timing_note"] = o.timing.note;
  op["median_us"] = number(o.median_us);
  op["min_us"] = number(o.min_us);
  op["samples_us"] = o.timing.samples_us;
  op["flops"] = o.flops;
  op["bytes"] = o.bytes;
  op["gb_per_s"] = number(o.rates.gbs);
  op["tflop_per_s"] = number(o.rates.tflops);
  op["roof_us"] = number(o.rates.roof_us);
  op["pct_of_roof"] = number(o.rates.pct_of_roof);
  if (o.checked) {
    op["check"] = {{"max_rel_err", number(o.check.max_rel_err)},
                   {"tolerance", o.tolerance},
                   {"passed", !o.check_failed()},
                   {"worst_output", o.check.worst},
                   {"scope", o.check.scope}};
  } else {
    op["check"] = nullptr;
  }
  return op;
}

// One run (a model shape at a precision) and its ops.
nlohmann::json run_json(const RunResult& run) {
  using nlohmann::json;
  const ModelConfig& m = run.shape.cfg;
  json r;
  r["config"] = run.shape.name;
  r["model"] = {
      {"vocab_size", m.vocab_size}, {"hidden_dim", m.hidden_dim},     {"num_layers", m.num_layers},
      {"num_heads", m.num_heads},   {"num_kv_heads", m.num_kv_heads}, {"head_dim", m.head_dim()},
      {"ffn_dim", m.ffn_dim}};
  r["batch_size"] = run.shape.batch.batch;
  r["seq_len"] = run.shape.batch.seq;
  r["tokens"] = run.shape.batch.tokens();
  r["precision"] = precision_label(run.precision);
  if (run.roof.known()) {
    r["roof"] = {{"tflops", run.roof.tflops}, {"bandwidth_gbs", run.roof.bandwidth_gbs}};
  } else {
    r["roof"] = nullptr;
  }
  json ops = json::array();
  for (const OpResult& o : run.ops) ops.push_back(op_json(o));
  r["ops"] = ops;
  return r;
}

}  // namespace

nlohmann::json report_json(const BenchReport& report) {
  using nlohmann::json;
  json j;
  j["device"] = report.device;
  if (report.peak) {
    const prof::DevicePeak& p = *report.peak;
    j["peak"] = {{"name", p.name},
                 {"fp32_tflops", p.fp32_tflops},
                 {"bf16_tflops", p.bf16_tflops},
                 {"fp16_tflops", p.fp16_tflops},
                 {"bandwidth_gbs", p.bandwidth_gbs}};
  } else {
    j["peak"] = nullptr;
  }
  j["timing"] = {{"mode", timing_mode_name(report.timing.mode)},
                 {"warmup", report.timing.warmup},
                 {"repeats", report.timing.repeats}};
  j["check"] = report.check;
  json runs = json::array();
  for (const RunResult& run : report.runs) runs.push_back(run_json(run));
  j["runs"] = runs;
  return j;
}

void write_report_json(const std::string& path, const BenchReport& report) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << report_json(report).dump(2) << "\n";
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw RuntimeFailure("--json " + path + ": cannot write " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeFailure("--json " + path + ": cannot rename " + tmp + " to it");
  }
}

}  // namespace tinyllama::bench
