#include "bench_suite/compare.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "bench_suite/svg_chart.h"

namespace tinyllama::suite {
namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

// MB as train reports memory: 1e6 bytes.
std::string megabytes(std::int64_t bytes) {
  return fixed(static_cast<double>(bytes) / 1e6, 2) + " MB";
}

// The plain (unswitched) point of a level.
const PointResult* level_point(const CompareReport& report, const std::string& level) {
  for (const PointResult& r : report.runs.points) {
    if (r.point.level == level && r.point.variant.name.empty()) return &r;
  }
  return nullptr;
}

nlohmann::json profile_json(const ProfileFigures& p) {
  nlohmann::json top = nlohmann::json::array();
  for (const TopKernel& k : p.top) {
    top.push_back({{"name", k.name},
                   {"share_pct", k.share_pct},
                   {"ms_per_step", k.ms_per_step},
                   {"calls_per_step", k.calls_per_step}});
  }
  const auto figure = [&](auto v) {
    return p.ok && p.has_kernels ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  return {{"status", p.ok ? "ok" : "failed"},
          {"error", p.error},
          {"kernel_statistics", p.has_kernels},
          {"note", p.note},
          {"kernel_dispatches_per_step", figure(p.dispatches_per_step)},
          {"unique_kernels", figure(p.unique_kernels)},
          {"top_kernels", top},
          {"trace_bytes", p.ok ? nlohmann::json(p.trace_bytes) : nlohmann::json(nullptr)}};
}

}  // namespace

ProfileFigures read_profile_summary(const nlohmann::json& summary, std::int64_t trace_bytes) {
  ProfileFigures p;
  p.ok = true;
  p.trace_bytes = trace_bytes;
  p.has_kernels = summary.value("kernel_statistics", false) && summary.contains("gpu") &&
                  summary.at("gpu").is_object();
  if (!p.has_kernels) {
    std::string why;
    for (const nlohmann::json& n : summary.value("notes", nlohmann::json::array())) {
      if (n.is_string() && why.empty()) why = n.get<std::string>();
    }
    p.note = "no kernel records" + (why.empty() ? std::string() : ": " + why);
    return p;
  }
  const nlohmann::json& gpu = summary.at("gpu");
  p.dispatches_per_step = gpu.at("kernel_dispatches_per_step").get<double>();
  p.unique_kernels = gpu.at("unique_kernels").get<int>();
  for (const nlohmann::json& k : gpu.at("top_kernels")) {
    if (p.top.size() == 3) break;
    p.top.push_back({k.at("name").get<std::string>(), k.at("share_pct").get<double>(),
                     k.at("ms_per_step").get<double>(), k.at("calls_per_step").get<double>()});
  }
  return p;
}

nlohmann::json to_json(const CompareReport& report) {
  nlohmann::json j = to_json(report.runs);
  j["tool"] = "tinyllama compare";
  nlohmann::json levels = nlohmann::json::array();
  for (std::size_t i = 0; i < report.levels.size(); ++i) {
    levels.push_back({{"level", report.levels[i]}, {"profile", profile_json(report.profiles[i])}});
  }
  j["levels"] = levels;
  nlohmann::json effects = nlohmann::json::array();
  for (const AblationRow& r : ablation_rows(report.runs.points)) {
    effects.push_back({{"point", r.base_key},
                       {"switched", r.switched},
                       {"status", r.ok ? "ok" : "failed"},
                       {"error", r.error},
                       {"ms_per_step", r.ok ? nlohmann::json(r.switched_ms) : nullptr},
                       {"preset_ms_per_step", r.ok ? nlohmann::json(r.base_ms) : nullptr},
                       {"effect_ms", r.ok ? nlohmann::json(r.effect_ms()) : nullptr},
                       {"effect_pct", r.ok ? nlohmann::json(r.effect_pct()) : nullptr}});
  }
  j["fusion_effects"] = effects;
  return j;
}

namespace {

// The title, the environment and the level table's header.
std::string markdown_intro(const CompareReport& report) {
  const BenchReport& runs = report.runs;
  std::string out = "# tinyllama compare\n\nModel " + runs.model + ", " +
                    std::to_string(runs.warmup_steps) + " warm-up + " +
                    std::to_string(runs.num_steps) + " timed steps per run, device " + runs.device +
                    ".\n\n| environment | |\n|---|---|\n";
  for (const auto& [name, value] : runs.environment) {
    out += "| " + name + " | " + markdown_cell(value) + " |\n";
  }
  out +=
      "\nThroughput, ms/step and peak memory come from a plain run of each level; the kernel "
      "figures from a second run with --profile (kernel dispatches and unique kernels per "
      "profiled step, top kernels by GPU time, size of trace.json).\n\n| | ";
  std::string rule = "|---|";
  for (const std::string& level : report.levels) {
    out += level + " |";
    rule += "---:|";
    if (&level != &report.levels.back()) out += " ";
  }
  return out + "\n" + rule + "\n";
}

// One row of the level table: its name, then a cell per level.
template <typename Cell>
std::string level_row(const CompareReport& report, const std::string& name, Cell cell) {
  std::string out = "| " + name + " |";
  for (std::size_t i = 0; i < report.levels.size(); ++i) {
    const PointResult* r = level_point(report, report.levels[i]);
    out += " " + cell(r, report.profiles[i]) + " |";
  }
  return out + "\n";
}

// A cell from the level's plain run.
template <typename Figure>
auto plain_cell(Figure figure) {
  return [figure](const PointResult* r, const ProfileFigures&) -> std::string {
    if (!r) return "-";
    return r->ok ? figure(*r) : "failed: " + markdown_cell(r->error);
  };
}

// A cell from the level's profiled run's kernel records.
template <typename Figure>
auto kernel_cell(Figure figure) {
  return [figure](const PointResult*, const ProfileFigures& p) -> std::string {
    if (!p.ok) return "failed: " + markdown_cell(p.error);
    return p.has_kernels ? figure(p) : std::string("n/a (no kernel records, see below)");
  };
}

// The rows of the plain runs: throughput, time, speed-up, clock, memory.
std::string run_rows(const CompareReport& report) {
  std::string out =
      level_row(report, "throughput (tokens/s)",
                plain_cell([](const PointResult& r) { return fixed(r.tokens_per_s, 0); }));
  out += level_row(report, "ms/step",
                   plain_cell([](const PointResult& r) { return fixed(r.ms_per_step, 3); }));
  out += level_row(report, "speed-up over " + report.levels.front(),
                   plain_cell([&](const PointResult& r) {
                     const PointResult* first = level_point(report, report.levels.front());
                     return first && first->ok ? fixed(first->ms_per_step / r.ms_per_step, 2) + "x"
                                               : std::string("-");
                   }));
  // The clock the plain runs held (a power-capped GPU runs the same kernels
  // slower); left out where no level's run sampled one (the CPU).
  bool any_clock = false;
  for (const std::string& level : report.levels) {
    const PointResult* r = level_point(report, level);
    any_clock = any_clock || (r && r->sm_mhz);
  }
  if (any_clock) {
    out += level_row(report, "SM clock (power-capped share)", plain_cell([](const PointResult& r) {
                       return r.sm_mhz ? fixed(*r.sm_mhz, 0) + " MHz (" +
                                             fixed(r.power_capped_pct.value_or(0), 0) + " %)"
                                       : std::string("-");
                     }));
  }
  out += level_row(report, "peak memory (MB)",
                   plain_cell([](const PointResult& r) { return fixed(r.peak_mb, 1); }));
  return out;
}

// The rows of the profiled runs: dispatches, unique kernels, top kernels, trace size.
std::string kernel_rows(const CompareReport& report) {
  std::string out = level_row(
      report, "kernel dispatches per step",
      kernel_cell([](const ProfileFigures& p) { return fixed(p.dispatches_per_step, 0); }));
  out += level_row(report, "unique kernels", kernel_cell([](const ProfileFigures& p) {
                     return std::to_string(p.unique_kernels);
                   }));
  for (int k = 0; k < 3; ++k) {
    out += level_row(report, "top kernel " + std::to_string(k + 1),
                     kernel_cell([k](const ProfileFigures& p) {
                       if (static_cast<int>(p.top.size()) <= k) return std::string("-");
                       const TopKernel& t = p.top[k];
                       return "`" + markdown_cell(t.name, 80) + "` " + fixed(t.share_pct, 1) +
                              " % (" + fixed(t.ms_per_step, 3) + " ms)";
                     }));
  }
  out += level_row(report, "trace size", [](const PointResult*, const ProfileFigures& p) {
    return p.ok ? megabytes(p.trace_bytes) : "failed: " + markdown_cell(p.error);
  });
  return out;
}

// Why a level has no kernel figures, said once per distinct reason.
std::string missing_kernel_notes(const CompareReport& report) {
  std::vector<std::string> notes;
  for (const ProfileFigures& p : report.profiles) {
    if (!p.ok || p.has_kernels) continue;
    bool seen = false;
    for (const std::string& n : notes) seen = seen || n == p.note;
    if (!seen) notes.push_back(p.note);
  }
  std::string out;
  for (const std::string& n : notes) out += "\nNo kernel figures: " + n + ".\n";
  return out;
}

}  // namespace

std::string to_markdown(const CompareReport& report) {
  std::string out = markdown_intro(report);
  out += run_rows(report);
  out += kernel_rows(report);
  out += missing_kernel_notes(report);
  const std::vector<AblationRow> effects = ablation_rows(report.runs.points);
  if (!effects.empty()) {
    out +=
        "\n## Each fusion's measured effect\n\nEach level again with one of the choices it "
        "changes over the level before switched back alone: the effect is that run's ms/step "
        "minus the level's (positive: the fusion saves that much).\n\n" +
        ablation_markdown(effects);
  }
  return out;
}

std::vector<NamedSvg> compare_plots(const CompareReport& report) {
  Series ms{"ms/step", {}}, peak{"peak MB", {}}, dispatches{"dispatches/step", {}};
  for (std::size_t i = 0; i < report.levels.size(); ++i) {
    const PointResult* r = level_point(report, report.levels[i]);
    ms.values.push_back(r && r->ok ? r->ms_per_step : kNone);
    peak.values.push_back(r && r->ok ? r->peak_mb : kNone);
    const ProfileFigures& p = report.profiles[i];
    dispatches.values.push_back(p.ok && p.has_kernels ? p.dispatches_per_step : kNone);
  }
  std::vector<NamedSvg> out = {
      {"compare_ms_per_step.svg",
       bar_chart_svg({"Step time per level", "level", "ms per step", report.levels, {ms}})},
      {"compare_peak_memory.svg",
       bar_chart_svg({"Peak memory per level", "level", "peak MB", report.levels, {peak}})},
  };
  bool any_dispatches = false;
  for (double v : dispatches.values) any_dispatches = any_dispatches || std::isfinite(v);
  if (any_dispatches) {
    out.push_back(
        {"compare_dispatches.svg",
         bar_chart_svg(
             {"Kernel dispatches per step", "level", "dispatches", report.levels, {dispatches}})});
  }
  const std::vector<AblationRow> effects = ablation_rows(report.runs.points);
  if (!effects.empty()) {
    Chart chart{"Each fusion's effect (ms/step saved)", "fusion switched back", "ms", {}, {}};
    Series saved{"effect ms", {}};
    for (const AblationRow& r : effects) {
      chart.categories.push_back(r.base_key.substr(0, r.base_key.find(' ')) + ": " + r.switched);
      saved.values.push_back(r.ok ? r.effect_ms() : kNone);
    }
    chart.series.push_back(saved);
    out.push_back({"compare_fusion_effects.svg", bar_chart_svg(chart)});
  }
  return out;
}

}  // namespace tinyllama::suite
