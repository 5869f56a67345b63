#include "compare_command.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_suite/compare.h"
#include "bench_suite/environment.h"
#include "bench_suite/outputs.h"
#include "core/errors.h"
#include "io/json_file.h"
#include "option_value.h"
#include "train/flag_values.h"

namespace tinyllama::cli {
namespace {

namespace fs = std::filesystem;
using suite::BenchPoint;
using suite::PointResult;
using suite::ProfileFigures;

// A --profile run of the level's point, read back from its profile directory.
ProfileFigures profile_level(const suite::RunSettings& settings, const BenchPoint& point,
                             const std::string& profile_steps) {
  const fs::path dir =
      fs::path(settings.out_dir) / "points" / (suite::slug(point.key()) + "_profile");
  const fs::path profile_dir = dir / "profile";
  const PointResult run = suite::run_point(
      settings, point,
      {"--profile", "--profile-dir", profile_dir.string(), "--profile-steps", profile_steps},
      "_profile");
  ProfileFigures figures;
  if (!run.ok) {
    figures.error = run.error;
    return figures;
  }
  const nlohmann::json summary = read_json_object((profile_dir / "summary.json").string());
  if (summary.is_null()) {
    figures.error = "no readable " + (profile_dir / "summary.json").string();
    return figures;
  }
  std::error_code ec;
  const auto trace_bytes = fs::file_size(profile_dir / "trace.json", ec);
  try {
    return suite::read_profile_summary(summary, ec ? 0 : static_cast<std::int64_t>(trace_bytes));
  } catch (const nlohmann::json::exception& e) {
    figures.error = std::string("summary.json: ") + e.what();
    return figures;
  }
}

std::string ms_text(double ms) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f ms/step", ms);
  return text;
}

void progress(int done, int total, const std::string& what) {
  std::cout << "[" << done << "/" << total << "] " << what << std::endl;
}

}  // namespace

CompareCommand::CompareCommand(CLI::App& app)
    : cmd_(app.add_subcommand("compare",
                              "compare the levels at one point: speed, memory, kernel profile "
                              "and each fusion's measured effect")) {
  CLI::App* cmd = cmd_;
  CompareArgs& a = args_;
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  value(cmd, "--levels", a.levels, "LIST",
        "comma-separated levels in ladder order, or all (every level this binary implements)")
      ->group("Point");
  value(cmd, "--precision", a.precision, "{fp32,bf16,fp16}", "the precision of every run")
      ->group("Point");
  value(cmd, "--batch-size", a.batch_size, "INT", "rows per step B")->group("Point");
  value(cmd, "--seq-len", a.seq_len, "INT", "tokens per row S")->group("Point");
  value(cmd, "--profile-steps", a.profile_steps, "INT",
        "timed steps each level's --profile run records")
      ->group("Point");
  cmd->add_flag("--no-effects", a.no_effects,
                "skip the fusion effects (the runs of each level with one of its new choices "
                "switched back)")
      ->group("Point");
  register_suite_flags(cmd, a.suite, "compare-out");
  cmd->footer(
      "Per level: a plain run and a --profile run of train (child processes), then, for each "
      "level after the first, one run per choice it changes over the level before with that "
      "choice switched back. Writes compare.md, compare.json and SVG plots into --out. On a "
      "device without kernel records (the CPU) the kernel rows say so instead of figures.");
}

int CompareCommand::run() const {
  const CompareArgs& a = args_;
  suite::RunSettings settings = to_run_settings(a.suite);
  const std::vector<std::string> levels = suite::parse_level_list(a.levels);
  const std::vector<std::string> precisions = suite::parse_precision_list(a.precision);
  if (precisions.size() != 1) throw UsageError("--precision " + a.precision + ": one precision");
  const int batch = parse_int_flag("--batch-size", a.batch_size);
  const int seq = parse_int_flag("--seq-len", a.seq_len);
  if (parse_int_flag("--profile-steps", a.profile_steps) < 1) {
    throw UsageError("--profile-steps " + a.profile_steps + ": expected at least 1");
  }

  std::vector<BenchPoint> effects;
  if (!a.no_effects) {
    for (std::size_t i = 1; i < levels.size(); ++i) {
      for (const suite::ChoiceSwitch& s :
           suite::switches_between(level_preset(levels[i - 1]), level_preset(levels[i]))) {
        effects.push_back({levels[i], precisions[0], batch, seq, s});
      }
    }
  }
  const int total = static_cast<int>(2 * levels.size() + effects.size());
  suite::CompareReport report;
  report.levels = levels;
  report.runs.model = settings.model.describe();
  report.runs.num_steps = settings.num_steps;
  report.runs.warmup_steps = settings.warmup_steps;
  report.runs.device = settings.device.empty() ? "default" : settings.device;
  std::cout << "compare | model " << report.runs.model << " | " << precisions[0] << " B" << batch
            << " S" << seq << " | levels " << a.levels << " | " << total << " runs | out "
            << settings.out_dir << std::endl;
  nlohmann::json first_train;
  int done = 0;
  for (const std::string& level : levels) {
    const BenchPoint point{level, precisions[0], batch, seq, {}};
    const PointResult plain = suite::run_point(settings, point);
    if (plain.ok && first_train.is_null()) {
      first_train = read_json_object(
          (fs::path(settings.out_dir) / "points" / suite::slug(point.key()) / "train.json")
              .string());
      if (first_train.is_object() && first_train.contains("config")) {
        report.runs.device = first_train.at("config").value("device", report.runs.device);
      }
    }
    report.runs.points.push_back(plain);
    progress(
        ++done, total,
        point.key() + ": " + (plain.ok ? ms_text(plain.ms_per_step) : "FAILED: " + plain.error));
    report.profiles.push_back(profile_level(settings, point, a.profile_steps));
    const ProfileFigures& p = report.profiles.back();
    progress(++done, total,
             point.key() + " --profile: " +
                 (!p.ok           ? "FAILED: " + p.error
                  : p.has_kernels ? std::to_string(static_cast<int>(p.dispatches_per_step)) +
                                        " kernel dispatches per step"
                                  : p.note));
  }
  for (const BenchPoint& point : effects) {
    const PointResult r = suite::run_point(settings, point);
    report.runs.points.push_back(r);
    progress(++done, total,
             point.key() + ": " + (r.ok ? ms_text(r.ms_per_step) : "FAILED: " + r.error));
  }
  report.runs.environment = suite::collect_environment(first_train, nullptr);
  const std::vector<std::string> written = suite::write_compare_outputs(report, settings.out_dir);
  std::cout << "wrote " << written.size() << " files into " << settings.out_dir
            << " (compare.md, compare.json, plots)\n";
  int failed = 0;
  for (const PointResult& r : report.runs.points) failed += r.ok ? 0 : 1;
  for (const ProfileFigures& p : report.profiles) failed += p.ok ? 0 : 1;
  if (failed > 0) {
    throw RuntimeFailure(std::to_string(failed) + " of " + std::to_string(total) +
                         " runs failed (their error lines are in compare.md)");
  }
  return 0;
}

}  // namespace tinyllama::cli
