#pragma once
// The kernel bench's output: one table per (shape, precision) run, the
// closing summary, and the same figures as JSON (--json FILE).
#include <string>

#include <nlohmann/json.hpp>

#include "bench/runner.h"

namespace tinyllama::bench {

// The device and its roof, and how times were taken; printed once, first.
std::string format_preamble(const BenchReport& report);
// A run's header, its table (variants of an op on adjacent rows) and what
// each check compared.
std::string format_run(const BenchReport& report, const RunResult& run);
// Counts of ops run, skipped and failed, and each failure on a line.
std::string format_summary(const BenchReport& report);
// Failures (check failed or error), "" when none; one line, for the exit error.
std::string failure_line(const BenchReport& report);

nlohmann::json report_json(const BenchReport& report);
// Written to a temporary file and renamed, so a failed write leaves no
// partial file. Throws RuntimeFailure naming the path.
void write_report_json(const std::string& path, const BenchReport& report);

}  // namespace tinyllama::bench
