#pragma once
// A whole bench run as its outputs hold it: the environment it ran in, its
// settings and every point. The JSON form is also what --baseline reads
// back, so to_json and from_json are inverses.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench_suite/results.h"

namespace tinyllama::suite {

struct BenchReport {
  // GPU, driver, CUDA runtime, cuDNN, commit, host, date: name -> value,
  // "unknown" where it could not be found out.
  std::map<std::string, std::string> environment;
  std::string device;  // cpu | cuda
  std::string model;   // ModelFlags::describe()
  int num_steps = 0;
  int warmup_steps = 0;
  std::vector<PointResult> points;
};

nlohmann::json to_json(const BenchReport& report);
// Throws RuntimeFailure naming what is missing (a file that is not a bench
// report, e.g. a train --json, is refused by its "tool" key).
BenchReport report_from_json(const nlohmann::json& j);

// One header line, then one row per point (peers as columns).
std::string to_csv(const BenchReport& report);
// The environment, then a table of the points, their speed-up against the
// first level's point of the same precision and shape, and against the peer.
std::string to_markdown(const BenchReport& report);

}  // namespace tinyllama::suite
