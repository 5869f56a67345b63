#pragma once
// `tinyllama train`'s flags: every group of them (model, training,
// execution, op and kernel choices, outputs, profiling, the exercise, the
// run's data and recipe) registered on its command, each into TrainArgs.
#include <CLI/CLI.hpp>

#include "train_command.h"

namespace tinyllama::cli {

void register_train_flags(CLI::App* cmd, TrainArgs& a);

}  // namespace tinyllama::cli
