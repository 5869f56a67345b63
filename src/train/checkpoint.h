#pragma once
// Checkpoints: everything a run needs to continue exactly where it stopped
// (--checkpoint-dir, --resume). One safetensors file per checkpoint,
// DIR/ckpt-<steps>.safetensors, written atomically (io/atomic_file.h), so a
// checkpoint is complete or absent: the master weights and both AdamW
// moments as raw master-dtype bytes, one [rows, cols] tensor per parameter
// ("params.embedding", "adam_m.layers.0.wqkv", ...; the embedding with its
// vocab_size rows, never the LM head's padding), and in the metadata the
// step count, AdamW's update count, the loss scaler, the batch source's
// position and generator, the run's config, and what the run chose by
// timing (the GEMM algorithms, attention=auto's implementation), which a
// resumed run takes instead of timing again.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "train/options.h"

namespace tinyllama {

// The implicit move assignment runs nlohmann::json's, whose destruction of
// the old value may allocate; an allocation failure there ends the process,
// as anywhere else.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct CheckpointState {
  int steps_done = 0;       // training steps, warm-up included
  int applied_updates = 0;  // AdamW's step count (fp16's skipped steps excluded)
  double loss_scale = 1.0;  // LossScaler
  int clean_steps = 0;
  nlohmann::json sampler;  // BatchSource::state()
  std::string tuning;      // Backend::tuning_state(): "" when nothing was chosen by timing
  // The schedule's learning rate of the next step (step steps_done, 0-based;
  // train/lr_schedule.h), for a reader of the file: the position is
  // steps_done, and a resume recomputes the rate from the recipe, which the
  // checkpoint's identity pins.
  double next_lr = 0;
};

// DIR/ckpt-00000120.safetensors for 120 steps done.
std::string checkpoint_path(const std::string& dir, int steps_done);

// The checkpoints in dir, oldest first (by step).
std::vector<std::string> list_checkpoints(const std::string& dir);

// Writes a checkpoint of `model` and `state`, then deletes all but the
// newest `keep` (0: none deleted). Returns its path. Throws RuntimeFailure.
// A data-parallel rank other than 0, where rank 0 calls save_checkpoint:
// takes part in the same gathers of the sharded state, writing nothing.
void gather_checkpoint_state(const Model& model);

std::string save_checkpoint(const std::string& dir, const Model& model,
                            const CheckpointState& state, const TrainOptions& opts, int keep);

// The newest checkpoint in dir. Throws UsageError "--resume DIR: ..." when
// there is none.
std::string latest_checkpoint(const std::string& dir);

// attention=auto's choice in the checkpoint at `path` (step_plan_json.h);
// none when its run did not ask for auto. Reads the metadata only, so the
// plan can be resolved with it before anything is allocated. Throws
// UsageError for a file that is not a checkpoint.
std::optional<SavedAttentionChoice> saved_attention_choice(const std::string& path);

// Loads a checkpoint into model and returns its state; the embedding's
// padded rows are zero after it, as in a new model. Reads format version 1
// too (one flat tensor per block, padded rows included, which it drops). A
// checkpoint of another model, batch shape, precision or learning rate is a
// UsageError naming the flag and both values.
CheckpointState load_checkpoint(const std::string& path, Model& model, const TrainOptions& opts);

}  // namespace tinyllama
