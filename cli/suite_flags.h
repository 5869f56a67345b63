#pragma once
// The flags `bench` and `compare` share: the model every point trains, the
// step counts, the device, the output directory and the time limit of one
// run. Kept as typed text and converted by the project's rules.
#include <CLI/CLI.hpp>
#include <string>

#include "bench_suite/runner.h"

namespace tinyllama::cli {

struct SuiteFlags {
  std::string vocab_size = "1000";
  std::string hidden_dim = "512";
  std::string num_layers = "8";
  std::string num_heads = "8";
  std::string num_kv_heads;  // empty: train's default
  std::string ffn_dim;       // empty: train's default
  std::string num_steps = "50";
  std::string warmup_steps = "5";
  std::string device;  // empty: train's default
  std::string out;
  std::string timeout = "900";
};

void register_suite_flags(CLI::App* cmd, SuiteFlags& f, const std::string& default_out);

// Throws UsageError on a bad value.
suite::RunSettings to_run_settings(const SuiteFlags& f);

}  // namespace tinyllama::cli
