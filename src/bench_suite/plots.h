#pragma once
// The bench report's charts, drawn from its points (variants excluded):
// speed-up per level, time and memory against sequence length, throughput
// against batch size. Peers appear as series of their own where measured.
#include <string>
#include <vector>

#include "bench_suite/report.h"

namespace tinyllama::suite {

struct NamedSvg {
  std::string file;  // "speedup_per_level.svg"
  std::string svg;
};

std::vector<NamedSvg> bench_plots(const BenchReport& report);

}  // namespace tinyllama::suite
