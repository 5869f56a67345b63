#pragma once
// The flags of the training recipe (train/recipe.h): the learning-rate
// schedule, clipping, accumulation and AdamW's settings. Each is kept as
// text until apply_recipe_flags converts it, so that a flag not given keeps
// the workshop's default.
#include <CLI/CLI.hpp>
#include <string>

#include "train/options.h"

namespace tinyllama::cli {

struct RecipeFlags {
  std::string lr_schedule = "constant";
  std::string lr_warmup_steps;
  std::string min_lr;
  std::string lr_decay_steps;
  std::string grad_clip;
  bool log_grad_norm = false;
  std::string grad_accum_steps;
  std::string total_batch_tokens;
  std::string weight_decay;
  std::string adam_beta1;
  std::string adam_beta2;
  std::string adam_eps;
  std::string decay_params = "all";
};

void register_recipe_flags(CLI::App* cmd, RecipeFlags& f);

// Fills o.recipe; a malformed value is refused (UsageError naming the flag).
// validate_recipe (train/recipe.h) checks the ranges once the run is known.
void apply_recipe_flags(const RecipeFlags& f, TrainOptions& o);

}  // namespace tinyllama::cli
