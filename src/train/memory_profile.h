#pragma once
// --enable-memory-profiling: one step's memory timeline (prof/
// memory_timeline.h), exact from the plans, written as JSON and an SVG plot
// at the end of the run, with the driver's count of device memory in use
// sampled beside it (after setup and after every step; no step allocates,
// so a sample between steps sees the step's memory).
#include <string>
#include <vector>

#include "prof/memory_timeline_json.h"
#include "train/options.h"

namespace tinyllama {

// The SVG's path for a timeline written to json_path: its .json replaced
// by .svg, or .svg appended.
std::string memory_plot_path(const std::string& json_path);

class MemoryProfile {
 public:
  // Does nothing unless opts.memory_profile is set and this rank writes.
  MemoryProfile(const TrainOptions& opts, bool writer);
  bool enabled() const { return enabled_; }
  // Records the driver's count now (CUDA only).
  void sample(const std::string& point);
  // Traces the step, writes both files (each complete or absent) and
  // returns the line the CLI prints. Throws RuntimeFailure.
  std::string write() const;

 private:
  const TrainOptions& opts_;
  bool enabled_;
  std::vector<prof::DriverSample> samples_;
};

}  // namespace tinyllama
