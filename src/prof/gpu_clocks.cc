#include "prof/gpu_clocks.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/median.h"

namespace tinyllama::prof {
namespace {

using nlohmann::json;

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

}  // namespace tinyllama::prof
