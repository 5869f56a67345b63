#pragma once
// Runs the selected op variants at every selected shape and precision:
// for each, prepare the backend for the variant's choices, make the case,
// check it against the CPU reference, time it, and place it on the roofline.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/op_case.h"
#include "bench/roofline.h"
#include "bench/timing.h"
#include "model/backend.h"
#include "prof/device_peaks.h"

namespace tinyllama::bench {

struct OpResult {
  std::string op, variant, cost_path;
  std::string skipped;  // why the variant cannot run at this shape; "" when it ran
  std::string error;    // what failed while it ran; "" when nothing did
  Timing timing;
  double median_us = 0;
  double min_us = 0;
  std::int64_t flops = 0;  // from the cost model
  std::int64_t bytes = 0;
  Rates rates;
  bool checked = false;
  CheckResult check;
  double tolerance = 0;

  std::string label() const { return variant.empty() ? op : op + " " + variant; }
  bool check_failed() const { return checked && !(check.max_rel_err <= tolerance); }
  bool ok() const { return error.empty() && !check_failed(); }
};

struct RunResult {
  BenchShape shape;
  Precision precision;
  Roof roof;
  std::vector<OpResult> ops;
};

struct BenchReport {
  std::string device;
  std::optional<prof::DevicePeak> peak;
  TimingOptions timing;
  bool check = true;
  std::vector<RunResult> runs;
};

// Makes the backend under test for a precision (the CUDA backend; the
// tests pass the CPU backend).
using BackendFactory = std::function<std::unique_ptr<Backend>(Precision)>;

// Runs every (shape, precision) pair, shapes outermost, and calls `on_run`
// after each pair so the caller can print as the bench goes. A failure of
// one op (a device error, an unsupported shape) is recorded in its result
// and the bench goes on.
BenchReport run_bench(const BenchOptions& options, const BackendFactory& make_backend,
                      const std::function<void(const BenchReport&, const RunResult&)>& on_run);

}  // namespace tinyllama::bench
