#pragma once
// `tinyllama bench`: the matrix of levels x precisions x batch sizes x
// sequence lengths, each point a real training run of this binary (a child
// process), optionally beside the PyTorch peer, written as JSON, CSV,
// Markdown and SVG plots; --ablation adds each plan choice switched alone;
// --baseline checks the run against an earlier one (exit 1 on a regression).
#include <CLI/CLI.hpp>
#include <string>

#include "suite_flags.h"

namespace tinyllama::cli {

struct BenchArgs {
  std::string levels = "all";
  std::string precisions = "fp32,bf16";
  std::string batch_sizes = "8";
  std::string seq_lens = "128,512,1024";
  bool ablation = false;
  std::string peer = "auto";
  std::string peer_script;  // empty: the source tree's scripts/peer/torch_peer.py
  std::string peer_python = "python3";
  std::string peer_variants = "eager,compile";
  std::string baseline;
  std::string max_slowdown;
  std::string min_speedup;
  bool strict = false;
  std::string from_json;
  bool resume = false;
  SuiteFlags suite;
};

class BenchCommand {
 public:
  explicit BenchCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  BenchArgs args_;
};

}  // namespace tinyllama::cli
