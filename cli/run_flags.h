#pragma once
// The flags of a real training run -- its data, validation, checkpoints and
// resume -- kept apart from the model and level flags of train_command.cc.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "train/options.h"

namespace tinyllama::cli {

struct RunFlags {
  std::vector<std::string> data;
  std::vector<std::string> val_data;
  std::string val_fraction;  // empty: not given (0.1)
  std::string eval_every;    // empty: no evaluation
  std::string eval_steps;    // empty: not given (10)
  std::string checkpoint_dir;
  std::string checkpoint_every;  // empty: at the end (and on a signal) only
  std::string keep;              // empty: not given (3)
  std::string resume;
};

void register_run_flags(CLI::App* cmd, RunFlags& f);

// Fills the data, evaluation and checkpoint fields of o; a flag that means
// nothing without another is refused (UsageError naming both).
void apply_run_flags(const RunFlags& f, TrainOptions& o);

}  // namespace tinyllama::cli
