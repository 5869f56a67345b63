#pragma once
// `tinyllama validate`: every level at every precision against the float64
// CPU reference on seeded configs (train/numerics_check.h); exit 1 on any
// check beyond its limit.
#include <CLI/CLI.hpp>
#include <string>

namespace tinyllama::cli {

struct ValidateArgs {
  std::string device = "all";
  std::string level = "all";
  std::string json_path;
};

class ValidateCommand {
 public:
  explicit ValidateCommand(CLI::App& app);  // registers the subcommand
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  ValidateArgs args_;
};

}  // namespace tinyllama::cli
