#include "bench/bench_options.h"

#include <algorithm>

#include "core/errors.h"

namespace tinyllama::bench {
namespace {

// The repetitions are recorded into one CUDA graph: keep it a graph of a
// reasonable size.
constexpr int kMaxRepeats = 10000;

}  // namespace

std::vector<Precision> parse_precisions(const std::string& text) {
  std::vector<std::string> names;
  for (const std::string& item : split_list(text)) {
    if (item == "all") {
      names.insert(names.end(), {"fp32", "bf16", "fp16"});
    } else if (item == "fp32" || item == "bf16" || item == "fp16") {
      names.push_back(item);
    } else {
      throw UsageError("--precision " + text + ": unknown precision '" + item +
                       "'; expected fp32, bf16, fp16 or all (comma-separated)");
    }
  }
  if (names.empty()) {
    throw UsageError("--precision " + text +
                     ": expected fp32, bf16, fp16 or all (comma-separated)");
  }
  std::vector<Precision> out;
  std::vector<std::string> seen;
  for (const std::string& n : names) {
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    out.push_back(n == "fp32"   ? Precision::fp32()
                  : n == "bf16" ? Precision::amp(DType::BF16)
                                : Precision::amp(DType::F16));
  }
  return out;
}

std::string precision_label(Precision precision) {
  switch (precision.compute) {
    case DType::F32:
      return "fp32";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "fp16";
    case DType::F64:
      return "fp64";
  }
  return "?";
}

TimingMode parse_timing_mode(const std::string& text) {
  if (text == "graph") return TimingMode::Graph;
  if (text == "eager") return TimingMode::Eager;
  throw UsageError("--timing " + text + ": expected graph or eager");
}

void check_repeats(int repeats) {
  if (repeats < 1 || repeats > kMaxRepeats) {
    throw UsageError("--repeats " + std::to_string(repeats) + ": must be between 1 and " +
                     std::to_string(kMaxRepeats));
  }
}

void check_warmup(int warmup) {
  if (warmup < 1) {
    throw UsageError("--warmup " + std::to_string(warmup) +
                     ": must be at least 1 (the first call tunes the GEMMs; graph timing "
                     "records tuned ones)");
  }
}

}  // namespace tinyllama::bench
