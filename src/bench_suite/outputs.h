#pragma once
// The files of a bench or compare run in its output directory, each written
// whole or not at all (io/atomic_file.h): rewritten after every point, so an
// interrupted run keeps the points it finished.
#include <string>
#include <vector>

#include "bench_suite/compare.h"
#include "bench_suite/report.h"

namespace tinyllama::suite {

// bench.json, bench.csv, bench.md and the plots (bench_plots). Returns the
// paths written. Throws RuntimeFailure.
std::vector<std::string> write_bench_outputs(const BenchReport& report, const std::string& dir);

// compare.json, compare.md and its plots.
std::vector<std::string> write_compare_outputs(const CompareReport& report, const std::string& dir);

}  // namespace tinyllama::suite
