#include "train/recipe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/errors.h"
#include "train/options.h"

namespace tinyllama {
namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

void require_real(bool ok, const char* flag, double value, const char* allowed) {
  if (!ok || !std::isfinite(value)) {
    throw UsageError(std::string(flag) + " " + number(value) + ": " + allowed);
  }
}

int total_steps(const TrainOptions& opts) {
  return opts.warmup_steps + opts.num_steps;
}

}  // namespace

void validate_recipe(const TrainOptions& opts, int world) {
  const TrainingRecipe& r = opts.recipe;
  const int total = total_steps(opts);
  if (r.lr_warmup_steps < 0 || r.lr_warmup_steps > total) {
    throw UsageError("--lr-warmup-steps " + std::to_string(r.lr_warmup_steps) +
                     ": must lie in [0, " + std::to_string(total) +
                     "], the optimizer steps of the run (--warmup-steps + --num-steps)");
  }
  if (r.min_lr) {
    require_real(*r.min_lr >= 0 && *r.min_lr <= opts.learning_rate, "--min-lr", *r.min_lr,
                 "must lie in [0, --learning-rate]");
  }
  if (r.lr_decay_steps != 0) {
    if (r.lr_decay != LrDecay::Wsd) {
      throw UsageError(
          "--lr-decay-steps: only with --lr-schedule wsd (cosine and linear decay "
          "over every step after the warm-up)");
    }
    if (r.lr_decay_steps < 1 || r.lr_decay_steps > total - r.lr_warmup_steps) {
      throw UsageError("--lr-decay-steps " + std::to_string(r.lr_decay_steps) +
                       ": must lie in [1, " + std::to_string(total - r.lr_warmup_steps) +
                       "], the steps after the learning-rate warm-up");
    }
  }
  require_real(r.grad_clip >= 0, "--grad-clip", r.grad_clip,
               "must be above 0 (the largest gradient norm kept)");
  require_real(r.weight_decay >= 0, "--weight-decay", r.weight_decay, "must be 0 or more");
  require_real(r.adam_beta1 >= 0 && r.adam_beta1 < 1, "--adam-beta1", r.adam_beta1,
               "must lie in [0, 1)");
  require_real(r.adam_beta2 >= 0 && r.adam_beta2 < 1, "--adam-beta2", r.adam_beta2,
               "must lie in [0, 1)");
  require_real(r.adam_eps > 0, "--adam-eps", r.adam_eps, "must be above 0");
  if (r.grad_accum_steps < 1) {
    throw UsageError("--grad-accum-steps " + std::to_string(r.grad_accum_steps) +
                     ": must be at least 1");
  }
  if (r.total_batch_tokens != 0) {
    if (r.grad_accum_steps != 1) {
      throw UsageError("--total-batch-tokens: not with --grad-accum-steps (it derives them)");
    }
    const std::int64_t per_micro = opts.shape.tokens() * world;
    if (r.total_batch_tokens < per_micro || r.total_batch_tokens % per_micro != 0) {
      throw UsageError("--total-batch-tokens " + std::to_string(r.total_batch_tokens) +
                       ": must be a multiple of --batch-size x --seq-len" +
                       (world > 1 ? " x --gpus" : std::string()) + " = " +
                       std::to_string(per_micro) + " tokens per micro-batch");
    }
  }
  if (opts.data.empty()) {
    const std::int64_t rows =
        static_cast<std::int64_t>(opts.shape.batch) * world * micro_batches(opts, world);
    if (rows > opts.data_pool_rows) {
      throw UsageError("--batch-size " + std::to_string(opts.shape.batch) + ": a step draws " +
                       std::to_string(rows) + " distinct rows (every micro-batch" +
                       (world > 1 ? ", every rank" : "") + "), more than the synthetic pool's " +
                       std::to_string(opts.data_pool_rows));
    }
  }
}

int micro_batches(const TrainOptions& opts, int world) {
  const TrainingRecipe& r = opts.recipe;
  if (r.total_batch_tokens == 0) return r.grad_accum_steps;
  return static_cast<int>(r.total_batch_tokens / (opts.shape.tokens() * world));
}

UpdateRecipe update_recipe(const TrainOptions& opts, int world) {
  UpdateRecipe u;
  u.accumulation = micro_batches(opts, world);
  u.clip_norm = opts.recipe.grad_clip;
  u.report_norm = opts.recipe.log_grad_norm;
  u.decay_matrices_only = opts.recipe.decay_matrices_only;
  return u;
}

LrSchedule lr_schedule(const TrainOptions& opts) {
  const TrainingRecipe& r = opts.recipe;
  LrSchedule s;
  s.decay = r.lr_decay;
  s.peak = opts.learning_rate;
  s.floor = r.min_lr.value_or(opts.learning_rate / 10);
  s.warmup = r.lr_warmup_steps;
  s.total = total_steps(opts);
  if (r.lr_decay == LrDecay::Wsd) {
    const int after = s.total - s.warmup;
    s.decay_steps = r.lr_decay_steps > 0 ? r.lr_decay_steps : std::max(1, after / 5);
  }
  return s;
}

AdamWHyper adamw_hyper(const TrainOptions& opts) {
  AdamWHyper hp;
  hp.lr = static_cast<float>(opts.learning_rate);
  hp.beta1 = static_cast<float>(opts.recipe.adam_beta1);
  hp.beta2 = static_cast<float>(opts.recipe.adam_beta2);
  hp.eps = static_cast<float>(opts.recipe.adam_eps);
  hp.weight_decay = static_cast<float>(opts.recipe.weight_decay);
  return hp;
}

std::string describe_recipe(const TrainOptions& opts, int world) {
  const TrainingRecipe& r = opts.recipe;
  std::string out = "lr " + lr_schedule(opts).describe() + " | AdamW betas (" +
                    number(r.adam_beta1) + ", " + number(r.adam_beta2) + ") eps " +
                    number(r.adam_eps) + " weight decay " + number(r.weight_decay) +
                    (r.decay_matrices_only ? " on the matrices" : " on every tensor");
  out += r.grad_clip > 0 ? " | clip grad norm " + number(r.grad_clip)
                         : (r.log_grad_norm ? " | grad norm logged" : " | no clipping");
  const int micro = micro_batches(opts, world);
  if (micro > 1) {
    out += " | " + std::to_string(micro) + " micro-batches of " +
           std::to_string(opts.shape.tokens() * world) +
           " tokens = " + std::to_string(opts.shape.tokens() * world * micro) + " tokens per step";
  }
  return out;
}

}  // namespace tinyllama
