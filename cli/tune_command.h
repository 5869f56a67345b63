#pragma once
// `tinyllama tune`: the largest batch size whose planned memory fits a
// target, and the batch size with the best tokens/s, measured by short real
// runs (each a child process of this binary, so one that fails -- out of
// memory -- fails only its own point).
#include <CLI/CLI.hpp>
#include <string>

#include "train_command.h"

namespace tinyllama::cli {

struct TuneArgs {
  TrainArgs train;  // the model, level, device and seed flags, as train reads them
  std::string precision = "fp32";
  std::string max_memory;  // GB, required
  std::string batches;     // empty: powers of two up to the largest that fits
  std::string warmup_steps = "2";
  std::string num_steps = "5";
  std::string json_path;
};

class TuneCommand {
 public:
  explicit TuneCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  TuneArgs args_;
};

}  // namespace tinyllama::cli
