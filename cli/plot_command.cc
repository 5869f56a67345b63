#include "plot_command.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

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
      ->required()
      ->expected(1, -1);
  value(cmd_, "--output", output_, "FILE", "the SVG to write")->required();
  value(cmd_, "--title", title_, "TEXT", "the charts' title");
}

int PlotCommand::run() const {
  check_output_path("--output", output_);
  std::vector<nlohmann::json> reports;
  for (const std::string& path : reports_) {
    reports.push_back(read_json_file("plot", path));
    try {
      suite::run_curve({reports.back()});
    } catch (const std::invalid_argument& e) {
      throw UsageError("plot " + path + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
      throw UsageError("plot " + path + ": a step lacks a field (" + std::string(e.what()) + ")");
    }
  }
  const suite::RunCurve curve = suite::run_curve(reports);
  const std::string svg = suite::run_curve_svg(curve, title_);
  write_atomically("--output", output_, [&](FileSink& out) { out.write(svg); });
  std::cout << "wrote " << output_ << " (" << curve.steps.size() << " steps)" << std::endl;
  return 0;
}

}  // namespace tinyllama::cli
