#pragma once
// `tinyllama train`: its flags (DESIGN §1 defaults), their conversion into
// TrainOptions, and the run itself with its per-step lines, summary and
// JSON report.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "recipe_flags.h"
#include "run_flags.h"

#include "train/level_select.h"
#include "train/options.h"

namespace tinyllama::cli {

// Every value as typed: numbers are converted after parsing by our own rules
// (flag_values.h), so a bad value gets our one-line message and --help wins
// over any bad value next to it.
struct TrainArgs {
  std::string vocab_size = "1000";
  std::string hidden_dim = "512";
  std::string num_layers = "8";
  std::string num_heads = "8";
  std::string num_kv_heads;  // empty: derived from --num-heads
  std::string ffn_dim;       // empty: derived from --hidden-dim
  std::string seq_len = "256";
  std::string batch_size = "8";
  std::string num_steps = "50";
  std::string warmup_steps = "5";
  std::string learning_rate = "3e-4";
  std::string seed = "1234";
  std::string data_seed;  // "": --seed
  std::string log_every = "10";
  std::string device;  // empty: cuda when a device is present, else cpu
  std::string level{kDefaultLevel};
  std::string loss_chunk_rows;  // empty: the plan's choice
  bool use_amp = false;
  std::string amp_dtype = "bfloat16";
  std::string fp8_gemms = "auto";
  std::string fp8_scaling = "delayed";
  ToggleFlags toggles;
  std::string json_path;
  std::string save_weights;
  std::string init_from;
  std::string export_hf;
  std::string dump_dir;
  bool profile = false;
  std::string profile_dir;    // empty: not given ("profile")
  std::string profile_steps;  // empty: not given (5)
  bool profile_api_calls = false;
  bool profile_counters = false;
  std::string explain_kernel;    // empty: not given
  std::string memory_profile;    // --enable-memory-profiling [FILE]
  RunFlags run;                  // data, evaluation, checkpoints, resume
  RecipeFlags recipe;            // schedule, clipping, accumulation, AdamW settings
  std::string gpus;              // empty: not given
  std::string zero_stage = "1";  // ZeRO-1 (AdamW state sharded) or 0

  bool enable_all_profiling = false;  // --enable-all-profiling: every profiling output
  std::string compare_with_v1;        // --compare-with-v1 FILE: an earlier train --json
  // The debugging exercise (docs/EXERCISES.md).
  std::vector<std::string> inject;
  bool log_logit_stats = false;
  bool validate_setup = false;
};

class TrainCommand {
 public:
  explicit TrainCommand(CLI::App& app);  // registers the subcommand
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  TrainArgs args_;
};

// TrainArgs -> TrainOptions (the request; train/run_setup.h resolves it).
// Throws UsageError on a bad value.
TrainOptions to_train_options(const TrainArgs& args);

}  // namespace tinyllama::cli
