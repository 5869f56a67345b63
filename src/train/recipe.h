#pragma once
// The training recipe beyond the workshop's constant-lr AdamW (issue 41,
// docs/TRAINING.md): the learning-rate schedule, gradient clipping and
// accumulation, AdamW's settings and its weight-decay groups. The defaults
// are the workshop's step, so every figure measured without these flags
// holds.
#include <cstdint>
#include <optional>
#include <string>

#include "model/backend.h"
#include "model/step_plan.h"
#include "train/lr_schedule.h"

namespace tinyllama {

struct TrainingRecipe {
  LrDecay lr_decay = LrDecay::Constant;  // --lr-schedule
  int lr_warmup_steps = 0;               // --lr-warmup-steps (not --warmup-steps: untimed steps)
  std::optional<double> min_lr;          // --min-lr; none: a tenth of --learning-rate
  int lr_decay_steps = 0;                // --lr-decay-steps (wsd); 0: a fifth of the steps
  double grad_clip = 0;                  // --grad-clip; 0: off
  bool log_grad_norm = false;            // --log-grad-norm
  int grad_accum_steps = 1;              // --grad-accum-steps
  std::int64_t total_batch_tokens = 0;   // --total-batch-tokens; 0: not given
  double weight_decay = 0.01;            // --weight-decay
  double adam_beta1 = 0.9;               // --adam-beta1
  double adam_beta2 = 0.999;             // --adam-beta2
  double adam_eps = 1e-8;                // --adam-eps
  bool decay_matrices_only = false;      // --decay-params matrices
};

struct TrainOptions;

// Refuses bad values before anything runs: UsageError naming the flag
// (exit 2). world: the data-parallel ranks (1 without --gpus).
void validate_recipe(const TrainOptions& opts, int world);
// The micro-batches per optimizer step: --grad-accum-steps, or
// --total-batch-tokens / (batch * seq * world) (validate_recipe refuses one
// that does not divide).
int micro_batches(const TrainOptions& opts, int world);
// What the plan and the model read (StepPlan::update).
UpdateRecipe update_recipe(const TrainOptions& opts, int world);
// The run's schedule over warmup_steps + num_steps optimizer steps.
LrSchedule lr_schedule(const TrainOptions& opts);
// AdamW's constants (the learning rate is the schedule's, per step).
AdamWHyper adamw_hyper(const TrainOptions& opts);
// One line for the run header: "optimizer | AdamW betas (0.9, 0.999) ...".
std::string describe_recipe(const TrainOptions& opts, int world);

}  // namespace tinyllama
