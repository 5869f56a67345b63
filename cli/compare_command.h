#pragma once
// `tinyllama compare`: the workshop's level-by-level profiling comparison,
// made from measured runs: per level a plain run (throughput, ms/step, peak
// memory) and a --profile run (kernel dispatches, unique kernels, top 3
// kernels, trace size), and each fusion a level adds over the one before
// switched back alone; Markdown, JSON and SVG plots.
#include <CLI/CLI.hpp>
#include <string>

#include "suite_flags.h"

namespace tinyllama::cli {

struct CompareArgs {
  std::string levels = "all";
  std::string precision = "fp32";
  std::string batch_size = "8";
  std::string seq_len = "128";
  std::string profile_steps = "5";
  bool no_effects = false;
  SuiteFlags suite;
};

class CompareCommand {
 public:
  explicit CompareCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  CompareArgs args_;
};

}  // namespace tinyllama::cli
