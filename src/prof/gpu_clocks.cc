#include "prof/gpu_clocks.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

namespace tinyllama::prof {
namespace {

using nlohmann::json;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// The reasons that lower the clock under load, as the summary names them.
const std::pair<std::uint64_t, const char*> kReasons[] = {
    {kClockReasonPowerCap, "power cap"},           {kClockReasonSwThermal, "thermal (software)"},
    {kClockReasonHwThermal, "thermal (hardware)"}, {kClockReasonHwSlowdown, "hardware slowdown"},
    {kClockReasonPowerBrake, "power brake"},
};

}  // namespace

json clocks_summary(const ClockReport& report) {
  std::vector<ClockSample> busy;
  for (const ClockSample& s : report.samples) {
    if ((s.reasons & kClockReasonIdle) == 0) busy.push_back(s);
  }
  if (busy.empty()) {
    return json{{"note", !report.note.empty() ? report.note
                                              : std::string("no sample while the GPU was busy")}};
  }
  std::vector<double> sm, power;
  for (const ClockSample& s : busy) {
    sm.push_back(s.sm_mhz);
    power.push_back(s.power_w);
  }
  json reasons = json::object();
  for (const auto& [bit, name] : kReasons) {
    const auto n = std::count_if(busy.begin(), busy.end(), [bit = bit](const ClockSample& s) {
      return (s.reasons & bit) != 0;
    });
    reasons[name] = 100.0 * static_cast<double>(n) / static_cast<double>(busy.size());
  }
  json j{{"samples", busy.size()},
         {"interval_ms", report.interval_ms},
         {"sm_mhz_median", median(sm)},
         {"sm_mhz_min", *std::min_element(sm.begin(), sm.end())},
         {"sm_mhz_max", *std::max_element(sm.begin(), sm.end())},
         {"power_w_median", median(power)},
         {"power_w_max", *std::max_element(power.begin(), power.end())},
         {"reasons_pct", reasons}};
  j["device_max_sm_mhz"] = report.max_sm_mhz > 0 ? json(report.max_sm_mhz) : json(nullptr);
  j["power_limit_w"] = report.power_limit_w > 0 ? json(report.power_limit_w) : json(nullptr);
  return j;
}

std::string format_clocks(const json& c) {
  if (c.contains("note")) return "  clocks    not sampled: " + c["note"].get<std::string>() + "\n";
  std::string out = "  clocks    SM " + fmt("%.0f", c["sm_mhz_median"].get<double>()) +
                    " MHz median (" + fmt("%.0f", c["sm_mhz_min"].get<double>()) + "-" +
                    fmt("%.0f", c["sm_mhz_max"].get<double>()) + ")";
  if (c["device_max_sm_mhz"].is_number()) {
    const double max = c["device_max_sm_mhz"].get<double>();
    out += " of the GPU's " + fmt("%.0f", max) + " MHz (" +
           fmt("%.0f", 100.0 * c["sm_mhz_median"].get<double>() / max) + " %)";
  }
  out += ", power " + fmt("%.0f", c["power_w_median"].get<double>()) + " W median";
  if (c["power_limit_w"].is_number()) {
    out += " of its " + fmt("%.0f", c["power_limit_w"].get<double>()) + " W limit";
  }
  out += "; " + std::to_string(c["samples"].get<int>()) + " samples while busy\n";
  std::string held;
  for (const auto& [name, pct] : c["reasons_pct"].items()) {
    if (pct.get<double>() <= 0) continue;
    held += (held.empty() ? "" : ", ") + name + " in " + fmt("%.0f", pct.get<double>()) + " %";
  }
  out += held.empty() ? "            nothing held the clock down in any sample\n"
                      : "            clock held down by: " + held +
                            " of the samples (the peak FLOP/s assume the full clock)\n";
  return out;
}

}  // namespace tinyllama::prof
