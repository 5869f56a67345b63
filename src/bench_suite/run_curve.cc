#include "bench_suite/run_curve.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "bench_suite/svg_chart.h"

namespace tinyllama::suite {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr int kChartHeight = 420;  // svg_chart's documents

struct StepValues {
  double loss = kNan, lr = kNan, val_loss = kNan, grad_norm = kNan;
};

double number_or_nan(const nlohmann::json& step, const char* key) {
  return step.contains(key) && step[key].is_number() ? step[key].get<double>() : kNan;
}

void add_report(const nlohmann::json& report, std::map<int, StepValues>& by_step) {
  if (!report.is_object() || !report.contains("steps") || !report["steps"].is_array()) {
    throw std::invalid_argument("not a train --json report (no \"steps\")");
  }
  for (const nlohmann::json& s : report["steps"]) {
    StepValues& v = by_step[s.at("step").get<int>()];
    (void)s.at("loss");  // a train report's step has one
    v.loss = number_or_nan(s, "loss");
    v.lr = number_or_nan(s, "lr");
    v.grad_norm = number_or_nan(s, "grad_norm");
  }
  if (report.contains("run") && report["run"].contains("evals")) {
    for (const nlohmann::json& e : report["run"]["evals"]) {
      by_step[e.at("after_step").get<int>()].val_loss = e.at("val_loss").get<double>();
    }
  }
}

Chart step_chart(const RunCurve& c, const std::string& title, const std::string& y_label) {
  Chart chart;
  chart.title = title;
  chart.x_label = "step";
  chart.y_label = y_label;
  for (int s : c.steps) chart.categories.push_back(std::to_string(s));
  // About ten labels along the axis.
  chart.label_every = std::max<std::size_t>(1, (c.steps.size() + 9) / 10);
  return chart;
}

// A chart document placed at `y` inside the outer one.
std::string placed(std::string svg, int y) {
  const std::size_t at = svg.find("<svg ");
  if (at != std::string::npos) svg.insert(at + 5, "y=\"" + std::to_string(y) + "\" ");
  return svg;
}

}  // namespace

RunCurve run_curve(const std::vector<nlohmann::json>& reports) {
  std::map<int, StepValues> by_step;
  for (const nlohmann::json& r : reports) add_report(r, by_step);
  if (by_step.empty()) throw std::invalid_argument("the reports hold no steps");
  RunCurve curve;
  for (const auto& [step, v] : by_step) {
    curve.steps.push_back(step);
    curve.loss.push_back(v.loss);
    curve.lr.push_back(v.lr);
    curve.val_loss.push_back(v.val_loss);
    curve.grad_norm.push_back(v.grad_norm);
  }
  return curve;
}

namespace {

// values[i] at each of `steps`, NaN where the curve has no such step.
std::vector<double> on_steps(const RunCurve& c, const std::vector<double>& values,
                             const std::vector<int>& steps) {
  std::map<int, double> at;
  for (std::size_t i = 0; i < c.steps.size(); ++i) at[c.steps[i]] = values[i];
  std::vector<double> out;
  out.reserve(steps.size());
  for (int s : steps) {
    const auto it = at.find(s);
    out.push_back(it == at.end() ? kNan : it->second);
  }
  return out;
}

std::string stacked(const std::vector<Chart>& charts) {
  const std::string w = "720";
  const std::string h = std::to_string(static_cast<int>(charts.size()) * kChartHeight);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
                    "\" viewBox=\"0 0 " + w + " " + h + "\">\n";
  for (std::size_t i = 0; i < charts.size(); ++i) {
    out += placed(line_chart_svg(charts[i]), static_cast<int>(i) * kChartHeight);
  }
  return out + "</svg>\n";
}

}  // namespace

// The mean of the last `window` finite values at each point (NaN until
// one is seen): per-step losses of different runs cross each other every
// step; their running means show which run is lower.
std::vector<double> running_mean(const std::vector<double>& values, std::size_t window) {
  std::vector<double> out(values.size(), kNan);
  std::vector<double> kept;
  double sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) {
      kept.push_back(values[i]);
      sum += values[i];
      if (kept.size() > window) sum -= kept[kept.size() - 1 - window];
    }
    if (!kept.empty()) out[i] = sum / static_cast<double>(std::min(kept.size(), window));
  }
  return out;
}

// The steps after which any run evaluated: the validation chart's axis, so
// each run's evaluations join into a line.
std::vector<int> evaluated_steps(const std::vector<LabelledCurve>& runs) {
  std::set<int> steps;
  for (const LabelledCurve& r : runs) {
    for (std::size_t i = 0; i < r.curve.steps.size(); ++i) {
      if (std::isfinite(r.curve.val_loss[i])) steps.insert(r.curve.steps[i]);
    }
  }
  return {steps.begin(), steps.end()};
}

std::string runs_svg(const std::vector<LabelledCurve>& runs, const std::string& title) {
  std::set<int> all;
  for (const LabelledCurve& r : runs) all.insert(r.curve.steps.begin(), r.curve.steps.end());
  RunCurve axis;
  axis.steps.assign(all.begin(), all.end());
  // About a hundredth of the run: long enough to average out the batches.
  const std::size_t window = std::max<std::size_t>(1, axis.steps.size() / 100);
  Chart train = step_chart(
      axis, title + ": training loss, mean of " + std::to_string(window) + " steps", "loss");
  for (const LabelledCurve& r : runs) {
    train.series.push_back(
        {r.label, running_mean(on_steps(r.curve, r.curve.loss, axis.steps), window), false});
  }
  std::vector<Chart> charts{train};
  RunCurve evals;
  evals.steps = evaluated_steps(runs);
  if (!evals.steps.empty()) {
    Chart val = step_chart(evals, title + ": validation loss", "loss");
    for (const LabelledCurve& r : runs) {
      val.series.push_back({r.label, on_steps(r.curve, r.curve.val_loss, evals.steps), true});
    }
    charts.push_back(std::move(val));
  }
  return stacked(charts);
}

std::string run_curve_svg(const RunCurve& curve, const std::string& title) {
  const auto any_finite = [](const std::vector<double>& values) {
    return std::any_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
  };
  std::vector<Chart> charts;
  charts.push_back(step_chart(curve, title + ": loss", "loss"));
  charts.back().series.push_back({"train loss", curve.loss, /*markers=*/false});
  if (any_finite(curve.val_loss)) {
    charts.back().series.push_back({"val loss", curve.val_loss, /*markers=*/true});
  }
  charts.push_back(step_chart(curve, title + ": learning rate", "learning rate"));
  charts.back().series.push_back({"lr", curve.lr, /*markers=*/false});
  if (any_finite(curve.grad_norm)) {
    charts.push_back(step_chart(curve, title + ": gradient norm", "L2 norm (before clipping)"));
    charts.back().series.push_back({"grad norm", curve.grad_norm, /*markers=*/false});
  }
  return stacked(charts);
}

}  // namespace tinyllama::suite
