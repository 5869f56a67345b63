#include "plot_command.h"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_suite/run_curve.h"
#include "core/errors.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "option_value.h"

namespace tinyllama::cli {

PlotCommand::PlotCommand(CLI::App& app) {
  cmd_ = app.add_subcommand(
      "plot",
      "draw a training run's loss (train and validation), learning rate and gradient norm (where "
      "computed) against step as an SVG, from its train --json reports (a run and its "
      "resumptions join into one curve)");
  cmd_->add_option("reports", reports_, "train --json reports of one run, in order")
      ->type_name("FILE")
      ->expected(0, -1);
  cmd_->add_option("--run", runs_,
                   "instead of reports: one run of several to draw on shared axes, its label and "
                   "its reports (a run and its resumptions, comma-separated); repeat per run "
                   "(the same model in three precisions, or over seeds)")
      ->type_name("LABEL=FILE[,FILE...]");
  value(cmd_, "--output", output_, "FILE", "the SVG to write")->required();
  value(cmd_, "--title", title_, "TEXT", "the charts' title");
}

namespace {

// The curve of one run's reports, each checked on its own first so that a
// bad one is named.
suite::RunCurve curve_of(const std::vector<std::string>& paths) {
  std::vector<nlohmann::json> reports;
  for (const std::string& path : paths) {
    reports.push_back(read_json_file("plot", path));
    try {
      suite::run_curve({reports.back()});
    } catch (const std::invalid_argument& e) {
      throw UsageError("plot " + path + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
      throw UsageError("plot " + path + ": a step lacks a field (" + std::string(e.what()) + ")");
    }
  }
  return suite::run_curve(reports);
}

// "fp8=a.json,b.json" -> {"fp8", {"a.json", "b.json"}}.
std::pair<std::string, std::vector<std::string>> split_run(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw UsageError("--run " + text + ": expected LABEL=FILE[,FILE...]");
  }
  std::vector<std::string> files;
  std::size_t start = eq + 1;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma == start) throw UsageError("--run " + text + ": an empty file name");
    files.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return {text.substr(0, eq), files};
}

}  // namespace

int PlotCommand::run() const {
  check_output_path("--output", output_);
  if (reports_.empty() == runs_.empty()) {
    throw UsageError("plot: give one run's reports, or --run LABEL=FILE for each of several runs");
  }
  if (!runs_.empty()) {
    std::vector<suite::LabelledCurve> runs;
    for (const std::string& r : runs_) {
      const auto [label, files] = split_run(r);
      runs.push_back({label, curve_of(files)});
    }
    const std::string svg = suite::runs_svg(runs, title_);
    write_atomically("--output", output_, [&](FileSink& out) { out.write(svg); });
    std::cout << "wrote " << output_ << " (" << runs.size() << " runs)" << std::endl;
    return 0;
  }
  const suite::RunCurve curve = curve_of(reports_);
  const std::string svg = suite::run_curve_svg(curve, title_);
  write_atomically("--output", output_, [&](FileSink& out) { out.write(svg); });
  std::cout << "wrote " << output_ << " (" << curve.steps.size() << " steps)" << std::endl;
  return 0;
}

}  // namespace tinyllama::cli
