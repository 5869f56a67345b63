#pragma once
// What one `tinyllama kernels` run covers, and the parsing of the
// bench-specific values (precisions, timing mode) shared by the CLI and
// the tests.
#include <string>
#include <vector>

#include "bench/op_case.h"
#include "bench/op_registry.h"
#include "bench/shapes.h"
#include "bench/timing.h"
#include "model/config.h"

namespace tinyllama::bench {

struct BenchOptions {
  std::vector<BenchShape> shapes;
  std::vector<Precision> precisions;
  std::vector<const OpVariant*> ops;  // registry entries, in registry order
  TimingOptions timing;
  bool check = true;
  // BenchContext::check_elements (the tests lower it).
  std::int64_t check_elements = kCheckElements;
};

// "bf16,fp32" or "all" (fp32, bf16, fp16), in the order given, each once.
// bf16 and fp16 are AMP precisions: fp32 master weights, gradients and
// optimizer state, 16-bit activations. Throws UsageError naming --precision.
std::vector<Precision> parse_precisions(const std::string& text);
// "fp32", "bf16", "fp16".
std::string precision_label(Precision precision);

// "graph" or "eager". Throws UsageError naming --timing.
TimingMode parse_timing_mode(const std::string& text);

// The bounds of --repeats and --warmup. Throw UsageError naming the flag.
void check_repeats(int repeats);
void check_warmup(int warmup);

}  // namespace tinyllama::bench
