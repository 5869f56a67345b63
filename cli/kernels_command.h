#pragma once
// `tinyllama kernels`: the kernel bench (bench/, docs/KERNELS.md). Each CUDA
// op of one layer runs alone at the chosen shapes, is checked against the
// CPU reference, timed with CUDA events and placed on the roofline.
#include <CLI/CLI.hpp>
#include <string>

#include "bench/bench_options.h"

namespace tinyllama::cli {

// Every value as typed; converted and checked after parsing, so a bad value
// gets one line naming its flag (and --help wins over a bad value).
struct KernelsArgs {
  std::string config = "all";
  std::string hidden_dim, num_heads, num_kv_heads, ffn_dim, vocab_size, batch_size, seq_len;
  std::string ops;  // empty: all
  std::string precision = "bf16,fp32";
  std::string repeats = "20";
  std::string warmup = "5";
  std::string timing = "graph";
  bool no_check = false;
  std::string json_path;
};

class KernelsCommand {
 public:
  explicit KernelsCommand(CLI::App& app);  // registers the subcommand
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  KernelsArgs args_;
};

// KernelsArgs -> BenchOptions; throws UsageError naming the first bad flag.
bench::BenchOptions to_bench_options(const KernelsArgs& args);

}  // namespace tinyllama::cli
