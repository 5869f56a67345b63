#include "bench_suite/run_comparison.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_suite/results.h"
#include "core/errors.h"

namespace tinyllama::suite {

EarlierRun read_earlier_run(const std::string& file, const nlohmann::json& report) {
  EarlierRun run;
  run.file = file;
  for (const char* key : {"ms_per_step", "peak_mb"}) {
    if (!report.is_object() || !report.contains(key) || !report.at(key).is_number()) {
      throw UsageError("--compare-with-v1 " + file + ": not a train --json report (no \"" + key +
                       "\")");
    }
  }
  run.ms_per_step = report.at("ms_per_step").get<double>();
  run.peak_mb = report.at("peak_mb").get<double>();
  if (!(run.ms_per_step > 0)) {
    throw UsageError("--compare-with-v1 " + file + ": its ms_per_step is not positive");
  }
  if (report.contains("config") && report.at("config").is_object()) {
    run.level = report.at("config").value("level", "");
  }
  if (const std::optional<TrainClock> clock = train_report_clock(report)) {
    run.sm_mhz = clock->sm_mhz;
  }
  return run;
}

std::string RunComparison::summary_line() const {
  char text[512];
  std::snprintf(text, sizeof text,
                "  vs %s (%s)  %.2fx %s (%.3f -> %.3f ms/step) | peak memory %.2fx (%.1f -> %.1f "
                "MB)",
                earlier.level.empty() ? "earlier run" : earlier.level.c_str(), earlier.file.c_str(),
                speedup() >= 1 ? speedup() : 1 / speedup(), speedup() >= 1 ? "faster" : "slower",
                earlier.ms_per_step, ms_per_step, memory_ratio(), earlier.peak_mb, peak_mb);
  std::string line = text;
  if (earlier.sm_mhz && sm_mhz) {
    // The same code runs slower at a lower clock: the speed-up includes it.
    std::snprintf(text, sizeof text, " | SM clock %.0f -> %.0f MHz", *earlier.sm_mhz, *sm_mhz);
    line += text;
  }
  return line + "\n";
}

nlohmann::json RunComparison::to_json() const {
  return {{"file", earlier.file},
          {"level", earlier.level},
          {"baseline_ms_per_step", earlier.ms_per_step},
          {"baseline_peak_mb", earlier.peak_mb},
          {"speedup", speedup()},
          {"memory_ratio", memory_ratio()},
          {"baseline_sm_mhz", earlier.sm_mhz ? nlohmann::json(*earlier.sm_mhz) : nullptr},
          {"sm_mhz", sm_mhz ? nlohmann::json(*sm_mhz) : nullptr}};
}

}  // namespace tinyllama::suite
