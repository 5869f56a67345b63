#pragma once
// `tinyllama compare`: the workshop's v1-to-v4 profiling comparison made
// from measured runs. Per level: throughput, ms/step, peak memory (a plain
// run), kernel dispatches per step, unique kernels, the top 3 kernels by GPU
// time and the trace size (a --profile run of the same point), and each
// fusion the level adds over the one before, switched back alone.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench_suite/ablation.h"
#include "bench_suite/plots.h"
#include "bench_suite/report.h"

namespace tinyllama::suite {

struct TopKernel {
  std::string name;
  double share_pct = 0;  // of the profiled steps' kernel time
  double ms_per_step = 0;
  double calls_per_step = 0;
};

// A profile's figures (docs/PROFILING.md, summary.json). Without kernel
// records (a CPU run, CUPTI unavailable) has_kernels is false and `note`
// says why; no figure is made up for them.
struct ProfileFigures {
  bool ok = false;    // the profiled run and its summary were read
  std::string error;  // else why not
  bool has_kernels = false;
  std::string note;
  double dispatches_per_step = 0;
  int unique_kernels = 0;
  std::vector<TopKernel> top;  // at most 3
  std::int64_t trace_bytes = 0;
};

// From a profile directory's summary.json and its trace.json's size.
ProfileFigures read_profile_summary(const nlohmann::json& summary, std::int64_t trace_bytes);

struct CompareReport {
  BenchReport runs;  // the environment, each level's plain point, then the switched points
  std::vector<std::string> levels;
  std::vector<ProfileFigures> profiles;  // one per level
};

nlohmann::json to_json(const CompareReport& report);
std::string to_markdown(const CompareReport& report);
// ms/step, peak memory and dispatches per level; each fusion's effect.
std::vector<NamedSvg> compare_plots(const CompareReport& report);

}  // namespace tinyllama::suite
