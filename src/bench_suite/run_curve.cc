#include "bench_suite/run_curve.h"

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bench_suite/svg_chart.h"

namespace tinyllama::suite {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr int kChartHeight = 420;  // svg_chart's documents

struct StepValues {
  double loss = kNan, lr = kNan, val_loss = kNan;
};

void add_report(const nlohmann::json& report, std::map<int, StepValues>& by_step) {
  if (!report.is_object() || !report.contains("steps") || !report["steps"].is_array()) {
    throw std::invalid_argument("not a train --json report (no \"steps\")");
  }
  for (const nlohmann::json& s : report["steps"]) {
    StepValues& v = by_step[s.at("step").get<int>()];
    v.loss = s.at("loss").is_number() ? s["loss"].get<double>() : kNan;
    v.lr = s.contains("lr") && s["lr"].is_number() ? s["lr"].get<double>() : kNan;
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
  }
  return curve;
}

std::string run_curve_svg(const RunCurve& curve, const std::string& title) {
  Chart loss = step_chart(curve, title + ": loss", "loss");
  loss.series.push_back({"train loss", curve.loss, /*markers=*/false});
  bool any_val = false;
  for (double v : curve.val_loss) any_val = any_val || std::isfinite(v);
  if (any_val) loss.series.push_back({"val loss", curve.val_loss, /*markers=*/true});
  Chart lr = step_chart(curve, title + ": learning rate", "learning rate");
  lr.series.push_back({"lr", curve.lr, /*markers=*/false});
  const std::string w = "720";
  const std::string h = std::to_string(2 * kChartHeight);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
         "\" viewBox=\"0 0 " + w + " " + h + "\">\n" + placed(line_chart_svg(loss), 0) +
         placed(line_chart_svg(lr), kChartHeight) + "</svg>\n";
}

}  // namespace tinyllama::suite
