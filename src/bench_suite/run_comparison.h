#pragma once
// `train --compare-with-v1 FILE` (the workshop's flag name): this run
// against an earlier run's train --json, any level: its speed-up in ms/step
// and its peak memory as a ratio, for the summary and the JSON report.
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tinyllama::suite {

struct EarlierRun {
  std::string file;
  std::string level;  // as the earlier report names it ("" if absent)
  double ms_per_step = 0;
  double peak_mb = 0;
  std::optional<double> sm_mhz;  // its clocks' median SM clock, where it has one
};

// From an earlier train --json; throws UsageError naming the file and the
// missing key (a bench.json is refused the same way).
EarlierRun read_earlier_run(const std::string& file, const nlohmann::json& report);

struct RunComparison {
  EarlierRun earlier;
  double ms_per_step = 0;
  double peak_mb = 0;
  std::optional<double> sm_mhz;  // this run's median SM clock, where it has one
  double speedup() const { return ms_per_step > 0 ? earlier.ms_per_step / ms_per_step : 0; }
  double memory_ratio() const { return earlier.peak_mb > 0 ? peak_mb / earlier.peak_mb : 0; }
  // "  vs v1 (FILE)  1.83x faster (6.41 -> 3.50 ms/step) | peak memory 0.72x (512.0 -> 368.4 MB)",
  // then " | SM clock 1980 -> 1530 MHz" where both runs sampled one, and "\n".
  std::string summary_line() const;
  nlohmann::json to_json() const;
};

}  // namespace tinyllama::suite
