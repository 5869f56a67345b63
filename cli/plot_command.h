#pragma once
// `tinyllama plot`: a training run's loss (train and validation) and
// learning rate against step, as one SVG, from its --json reports; or, with
// --run, several runs' losses on shared axes.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tinyllama::cli {

class PlotCommand {
 public:
  explicit PlotCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  std::vector<std::string> reports_;
  std::vector<std::string> runs_;  // LABEL=FILE[,FILE...]
  std::string output_;
  std::string title_ = "training run";
};

}  // namespace tinyllama::cli
