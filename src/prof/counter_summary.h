#pragma once
// summary.json's "counters" section and its printed lines: the counter
// step (passes, time, how its ranges matched the profiled kernels), the top
// kernels' counters, every op (summed over layers) measured against the
// cost model, both placed on the roofline, and the ops whose measured DRAM
// bytes differ from the model's by more than 20 %. Made from plain inputs
// so that tests feed it recorded counter values.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "prof/attribution.h"
#include "prof/cost_model.h"
#include "prof/counters.h"
#include "prof/kernel_stats.h"
#include "prof/roofline.h"
#include "prof/roofline_svg.h"

namespace tinyllama::prof {

// A measured op's DRAM bytes may differ from the cost model's minimal
// bytes by this fraction before the summary names it.
inline constexpr double kDramBytesTolerance = 0.20;

struct CounterInputs {
  std::string unavailable;               // non-empty: why there are no counters (one line)
  std::vector<LaunchCounters> launches;  // the counter step's, matched to kernels
  std::string match_note;                // why ranges are not matched, when not
  std::size_t ranges = 0;                // ranges the counter step gave
  std::size_t passes = 0;
  std::size_t dropped_ranges = 0;
  std::vector<std::string> refused;
  double counter_step_ms = 0;  // the trainer's time of the counter step (replays included)
  // What the replay adds to each range, measured on an empty kernel and
  // already taken out of the launches' DRAM bytes (counters.h,
  // net_of_replay); 0 launches when it could not be measured.
  MetricValues replay_baseline = no_values();
  std::size_t baseline_launches = 0;
  // The DRAM pass (counters.h, dram_pass_metrics): its passes (0 when it did
  // not run or its values were not used: dram_note says why).
  std::size_t dram_passes = 0;
  std::string dram_note;
};

// What the section is computed from besides the counters.
struct CounterContext {
  const std::vector<KernelStat>* stats = nullptr;  // the profiled steps', by time
  const Attribution* attribution = nullptr;        // per-op profiled time
  const StepCost* cost = nullptr;
  double steps = 1;  // profiled steps
  Roofs roofs;
};

nlohmann::json counter_section(const CounterInputs& in, const CounterContext& ctx);

// The roofline drawing's points, from the section.
RooflineChart roofline_chart(const nlohmann::json& section, const std::string& title);

// The printed lines (each ending in '\n'); one line when unavailable.
std::string format_counter_summary(const nlohmann::json& section);

}  // namespace tinyllama::prof
