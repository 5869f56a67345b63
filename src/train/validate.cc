#include "train/validate.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/errors.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train/memory_profile.h"

namespace tinyllama {
namespace {

void require_at_least(const char* flag, long long value, long long minimum, const char* why = "") {
  if (value < minimum) {
    throw UsageError(std::string(flag) + " " + std::to_string(value) + ": must be at least " +
                     std::to_string(minimum) + why);
  }
}

void require_readable_file(const char* flag, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UsageError(std::string(flag) + " " + path + ": no such file");
  }
}

// A safetensors file whose header, read alone, describes data the file
// holds (io/safetensors.h validates the whole header against the file's
// size): a truncated or malformed file is refused before the run is
// announced, not after its header and plan are printed.
void require_safetensors(const char* flag, const std::string& path) {
  try {
    (void)read_safetensors_metadata(path);
  } catch (const RuntimeFailure& e) {
    throw UsageError(std::string(flag) + " " + e.what());
  }
}

// A safetensors file or a Hugging Face model directory (io/hf_directory.h).
void require_weights_source(const char* flag, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    require_readable_file(flag, path);
    require_safetensors(flag, path);
    return;
  }
  const std::string weights = (std::filesystem::path(path) / "model.safetensors").string();
  if (std::filesystem::is_regular_file(weights, ec)) require_safetensors(flag, weights);
}

}  // namespace

void require_parent_directory(const char* flag, const std::string& path) {
  check_output_path(flag, path);
}

void validate_options(const TrainOptions& opts) {
  opts.model.validate();
  require_at_least("--seq-len", opts.shape.seq, 2);
  require_at_least("--batch-size", opts.shape.batch, 1);
  if (opts.data.empty() && opts.shape.batch > opts.data_pool_rows) {
    throw UsageError("--batch-size " + std::to_string(opts.shape.batch) + ": must be at most " +
                     std::to_string(opts.data_pool_rows) +
                     ", the rows of the synthetic data pool (each step draws B distinct rows)");
  }
  require_at_least("--num-steps", opts.num_steps, 1);
  require_at_least("--warmup-steps", opts.warmup_steps, 0);
  require_at_least("--log-every", opts.log_every, 1);
  if (!std::isfinite(opts.learning_rate) || opts.learning_rate <= 0) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", opts.learning_rate);
    throw UsageError(std::string("--learning-rate ") + value + ": must be a finite number above 0");
  }
  require_weights_source("--init-from", opts.init_from);
  if (!opts.resume.empty()) require_safetensors("--resume", latest_checkpoint(opts.resume));
  if (!opts.init_from.empty() && !opts.resume.empty()) {
    throw UsageError("--init-from: not with --resume (the checkpoint holds the weights)");
  }
  if (!opts.data.empty() || opts.eval_every > 0) {
    require_at_least("--eval-every", opts.eval_every, 0);
    require_at_least("--eval-steps", opts.eval_steps, 1);
    if (!(opts.val_fraction > 0 && opts.val_fraction < 1)) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", opts.val_fraction);
      throw UsageError(std::string("--val-fraction ") + value + ": must lie between 0 and 1");
    }
  }
  if (!opts.checkpoint_dir.empty()) {
    check_output_directory("--checkpoint-dir", opts.checkpoint_dir);
    require_at_least("--checkpoint-every", opts.checkpoint_every, 0);
    require_at_least("--keep", opts.keep_checkpoints, 0);
  }
  check_output_path("--json", opts.json_path);
  check_output_path("--save-weights", opts.save_weights);
  if (!opts.export_hf.empty()) check_output_directory("--export-hf", opts.export_hf);
  if (!opts.memory_profile.empty()) {
    check_output_path("--enable-memory-profiling", opts.memory_profile);
    check_output_path("--enable-memory-profiling", memory_plot_path(opts.memory_profile));
    for (const std::string& path : {opts.memory_profile, memory_plot_path(opts.memory_profile)}) {
      if (same_output_file(opts.json_path, path)) {
        throw UsageError("--enable-memory-profiling " + opts.memory_profile + ": writes " + path +
                         ", the same file as --json; one would overwrite the other");
      }
    }
  }
  if (same_output_file(opts.json_path, opts.save_weights)) {
    throw UsageError("--json " + opts.json_path + ": the same file as --save-weights " +
                     opts.save_weights + "; one would overwrite the other");
  }
  if (opts.profile) {
    require_at_least("--profile-steps", opts.profile_steps, 1);
    std::error_code ec;
    if (opts.profile_dir.empty()) throw UsageError("--profile-dir '': expected a directory");
    if (std::filesystem::exists(opts.profile_dir, ec) &&
        !std::filesystem::is_directory(opts.profile_dir, ec)) {
      throw UsageError("--profile-dir " + opts.profile_dir +
                       ": exists and is not a directory (it is created if missing)");
    }
  }
}

}  // namespace tinyllama
