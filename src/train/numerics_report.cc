#include "train/numerics_report.h"

#include <cmath>
#include <cstdio>

#include "model/config_json.h"
#include "model/tolerance.h"

namespace tinyllama {
namespace {

constexpr const char* kRowFormat = "%-4s %-3s %-4s %-8s | %-19s | %-19s %-14s | %-19s | %s";

std::string error_cell(const ErrorCheck* e) {
  if (e == nullptr) return "-";
  char cell[64];
  std::snprintf(cell, sizeof cell, "%.2e / %.2e", e->error, e->limit);
  return cell;
}

nlohmann::json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nullptr;
}

}  // namespace

std::vector<NumericsCase> validation_cases(const std::vector<std::string>& levels, bool cpu,
                                           bool cuda) {
  std::vector<NumericsCase> out;
  std::vector<std::pair<DeviceKind, Precision>> runs;
  if (cpu) runs.emplace_back(DeviceKind::Cpu, Precision::fp32());
  if (cuda) {
    runs.emplace_back(DeviceKind::Cuda, Precision::fp32());
    runs.emplace_back(DeviceKind::Cuda, Precision::amp(DType::BF16));
    runs.emplace_back(DeviceKind::Cuda, Precision::amp(DType::F16));
  }
  for (const auto& [device, precision] : runs) {
    for (const NumericsConfig& config : validation_configs()) {
      for (const std::string& level : levels) out.push_back({config, level, device, precision});
    }
  }
  return out;
}

int ValidationRun::failures() const {
  int n = 0;
  for (const NumericsResult& r : results) n += r.pass() ? 0 : 1;
  return n;
}

std::string validation_header() {
  char line[256];
  std::snprintf(line, sizeof line, kRowFormat, "cfg", "lvl", "dev", "dtype", "loss err / limit",
                "grad err / limit", "(worst tensor)", "adamw err / limit", "verdict");
  return line;
}

std::string validation_row(const NumericsResult& r) {
  const ErrorCheck* grad = r.worst("grad");
  const std::string tensor = grad != nullptr ? grad->quantity.substr(5) : "";
  char line[256];
  std::snprintf(line, sizeof line, kRowFormat, r.c.config.name.c_str(), r.c.level.c_str(),
                device_name(r.c.device), precision_label(r.c.precision).c_str(),
                error_cell(r.worst("loss")).c_str(), error_cell(grad).c_str(), tensor.c_str(),
                error_cell(r.worst("adamw")).c_str(), r.pass() ? "PASS" : "FAIL");
  return line;
}

std::string validation_verdict(const ValidationRun& run) {
  const int n = static_cast<int>(run.results.size());
  const int failed = run.failures();
  std::string out = "validate: " + std::string(failed == 0 ? "PASS" : "FAIL") + ", " +
                    (failed == 0 ? std::to_string(n) + " cases"
                                 : std::to_string(failed) + " of " + std::to_string(n) + " cases") +
                    (failed == 0 ? " within their limits" : " beyond a limit");
  for (const std::string& s : run.skipped) out += "; skipped " + s;
  return out;
}

nlohmann::json validation_json(const ValidationRun& run) {
  nlohmann::json cases = nlohmann::json::array();
  for (const NumericsResult& r : run.results) {
    nlohmann::json checks = nlohmann::json::array();
    for (const ErrorCheck& e : r.checks) {
      nlohmann::json j = {{"quantity", e.quantity},
                          {"step", e.step},
                          {"error", number_or_null(e.error)},
                          {"limit", e.limit},
                          {"pass", e.pass()}};
      if (e.baseline >= 0) j["baseline_error"] = number_or_null(e.baseline);
      checks.push_back(j);
    }
    nlohmann::json model = model_shape_json(r.c.config.model);
    model.update({{"batch_size", r.c.config.shape.batch},
                  {"seq_len", r.c.config.shape.seq},
                  {"seed", r.c.config.seed}});
    cases.push_back({{"config", r.c.config.name},
                     {"model", model},
                     {"level", r.c.level},
                     {"device", device_name(r.c.device)},
                     {"precision", precision_label(r.c.precision)},
                     {"plan", r.plan},
                     {"step2_graph_replay", r.captured},
                     {"pass", r.pass()},
                     {"checks", checks}});
  }
  return {{"pass", run.failures() == 0},
          {"failures", run.failures()},
          {"cases", cases},
          {"skipped", run.skipped},
          {"tolerances",
           {{"fp32", kFp32Tolerance},
            {"adamw", kAdamwTolerance},
            {"amp_factor", kAmpFactor},
            {"amp_ulp",
             {{"bfloat16", compute_ulp(DType::BF16)}, {"float16", compute_ulp(DType::F16)}}}}}};
}

}  // namespace tinyllama
