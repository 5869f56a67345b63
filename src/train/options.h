#pragma once
// Everything a training run is configured by. A front end fills in what was
// asked (the model, the plan request, the device); resolve_run()
// (train/run_setup.h) turns the request into the resolved plan, which the
// trainer and the reports read.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/faults.h"
#include "model/step_plan.h"
#include "train/recipe.h"

namespace tinyllama {

struct TrainOptions {
  ModelConfig model;
  BatchShape shape{8, 256};
  PlanRequest request;                       // level preset, single overrides, precision
  std::optional<DeviceKind> device_request;  // empty: cuda when a device is found, else cpu
  // Data parallel (--gpus, or a launcher's environment): asked for here,
  // resolve_run puts what runs into plan.parallel. shape.batch is per rank.
  DataParallel parallel;
  StepPlan plan;  // resolve_run(): what the run does
  // Data parallel: rank 0's attention=auto choice, which the other ranks
  // take instead of their own timing (adopt_rank0_attention).
  std::optional<SavedAttentionChoice> rank0_attention;

  int num_steps = 50;
  int warmup_steps = 5;         // trained but untimed, before the measured steps
  double learning_rate = 3e-4;  // the peak of the schedule (recipe.lr_decay)
  TrainingRecipe recipe;        // schedule, clipping, accumulation, AdamW settings
  std::uint64_t seed = 1234;
  // --data-seed: the order the batches are drawn in (the synthetic pool and
  // its draws, or --data's shuffle); unset: seed. Runs from the same
  // weights over several data orders measure a precision's spread.
  std::optional<std::uint64_t> data_seed;
  std::uint64_t data_order_seed() const { return data_seed.value_or(seed); }
  int data_pool_rows = 1000;
  int log_every = 10;

  std::string json_path;     // --json: machine-readable summary
  std::string save_weights;  // --save-weights: safetensors after training
  std::string init_from;  // --init-from: safetensors file or Hugging Face directory to start from
  std::string export_hf;  // --export-hf: Hugging Face model directory after training
  std::string dump_dir;   // --dump-dir: initial weights, batches, step-1 grads (parity tests)

  // Data (data/): empty data means the synthetic pool.
  std::vector<std::string> data;      // --data: files or globs (shards or UTF-8 text)
  std::vector<std::string> val_data;  // --val-data: held-out files; else split off --data
  double val_fraction = 0.1;          // --val-fraction: tail of each --data file held out
  int eval_every = 0;                 // --eval-every: validation loss every N timed steps
  int eval_steps = 10;                // --eval-steps: batches per evaluation

  // Checkpoints (train/checkpoint.h).
  std::string checkpoint_dir;  // --checkpoint-dir
  int checkpoint_every = 0;    // --checkpoint-every: steps (warm-up included); 0: at the end only
  int keep_checkpoints = 3;    // --keep: the newest K are kept (0: all)
  std::string resume;          // --resume DIR: continue from its newest checkpoint

  bool profile = false;                 // --profile: record the first profile_steps timed steps
  std::string profile_dir = "profile";  // --profile-dir: where the profile files go
  int profile_steps = 5;                // --profile-steps
  bool profile_api_calls = false;       // --profile-api-calls: API records in eager profiled steps
  bool profile_counters = false;  // --profile-counters: hardware counters in a step of their own
  std::string explain_kernel;     // --explain-kernel NAME|RANK (implies profile_counters)
  // --enable-memory-profiling: one step's memory timeline as JSON here, and
  // its plot beside it (train/memory_profile.h); empty: off.
  std::string memory_profile;

  // The debugging exercise (model/faults.h, docs/EXERCISES.md).
  InjectedFaults faults;         // --inject NAME
  bool log_logit_stats = false;  // --log-logit-stats: a logits line after every step
  bool validate_setup = false;   // --validate-setup: a few checked steps, PASS or FAIL
};

}  // namespace tinyllama
