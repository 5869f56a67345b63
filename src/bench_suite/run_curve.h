#pragma once
// A training run's curve, drawn from its --json reports (`tinyllama plot`):
// the training loss per step with the validation losses on it, the
// learning rate per step below, and the gradient norm per step where the
// run computed it (--grad-clip, --log-grad-norm), in one SVG. Several reports of one run (a
// run and its resumptions) join into one curve by step number, the later
// report's value winning where they overlap.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tinyllama::suite {

struct RunCurve {
  std::vector<int> steps;  // timed step numbers, ascending
  std::vector<double> loss, lr;
  std::vector<double> val_loss;   // NaN where no evaluation followed the step
  std::vector<double> grad_norm;  // NaN where the run computed none
};

// Throws std::invalid_argument naming what a report lacks (it is not a
// `train --json` report, or holds no steps).
RunCurve run_curve(const std::vector<nlohmann::json>& reports);
std::string run_curve_svg(const RunCurve& curve, const std::string& title);

// Several runs on shared axes (`tinyllama plot --run LABEL=FILE`: the same
// model in three precisions, or over seeds): the training losses in one
// chart, the validation losses in a second where any run evaluated, a
// series per run named by its label; the steps are the union of the runs'.
// The training losses are running means over a hundredth of the steps (one
// batch's loss varies more than runs differ); the validation chart's axis
// holds the evaluated steps only, so each run's evaluations form a line.
struct LabelledCurve {
  std::string label;
  RunCurve curve;
};
std::string runs_svg(const std::vector<LabelledCurve>& runs, const std::string& title);

// runs_svg's two helpers. The mean of the last `window` finite values at
// each point (NaN before the first; NaNs are skipped, not counted).
std::vector<double> running_mean(const std::vector<double>& values, std::size_t window);
// The steps after which any of the runs evaluated, ascending.
std::vector<int> evaluated_steps(const std::vector<LabelledCurve>& runs);

}  // namespace tinyllama::suite
