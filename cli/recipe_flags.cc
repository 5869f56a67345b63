#include "recipe_flags.h"

#include "core/errors.h"
#include "option_value.h"
#include "train/flag_values.h"

namespace tinyllama::cli {
namespace {

void register_schedule(CLI::App* cmd, RecipeFlags& f) {
  value(cmd, "--lr-schedule", f.lr_schedule, "NAME",
        "learning rate over the run's optimizer steps (--warmup-steps included): constant "
        "(the workshop's), cosine or linear decay from --learning-rate to --min-lr, or wsd "
        "(warmup-stable-decay: constant, then a linear decay over the last --lr-decay-steps); "
        "formulas in docs/TRAINING.md")
      ->group("Training recipe");
  value(cmd, "--lr-warmup-steps", f.lr_warmup_steps, "INT",
        "a linear learning-rate warm-up over the first N optimizer steps, in front of any "
        "schedule (not --warmup-steps, which are untimed benchmark steps)")
      ->default_str("0")
      ->group("Training recipe");
  value(cmd, "--min-lr", f.min_lr, "FLOAT",
        "where cosine, linear and wsd decay to (default: --learning-rate / 10)")
      ->group("Training recipe");
  value(cmd, "--lr-decay-steps", f.lr_decay_steps, "INT",
        "wsd: the steps at the end that decay (default: a fifth of the steps after the warm-up)")
      ->group("Training recipe");
}

void register_gradients(CLI::App* cmd, RecipeFlags& f) {
  value(cmd, "--grad-clip", f.grad_clip, "FLOAT",
        "clip the global L2 norm of the gradient to this (torch.nn.utils.clip_grad_norm_); "
        "the norm is printed every step")
      ->group("Training recipe");
  cmd->add_flag("--log-grad-norm", f.log_grad_norm,
                "compute and print the gradient norm every step without clipping (one extra "
                "read of the gradient per step)")
      ->group("Training recipe");
  value(cmd, "--grad-accum-steps", f.grad_accum_steps, "INT",
        "micro-batches of --batch-size summed into each optimizer step (the gradient of their "
        "mean loss)")
      ->default_str("1")
      ->group("Training recipe");
  value(cmd, "--total-batch-tokens", f.total_batch_tokens, "INT",
        "tokens per optimizer step (llm.c's total batch size): derives --grad-accum-steps from "
        "--batch-size x --seq-len x --gpus, which must divide it")
      ->group("Training recipe");
}

void register_adamw(CLI::App* cmd, RecipeFlags& f) {
  value(cmd, "--weight-decay", f.weight_decay, "FLOAT", "AdamW's decoupled weight decay")
      ->default_str("0.01")
      ->group("Training recipe");
  value(cmd, "--decay-params", f.decay_params, "WHICH",
        "the tensors weight decay applies to: all (the workshop's) or matrices (the embedding "
        "and the linear weights, not the RMSNorm weights, as nanoGPT and LLaMA recipes do)")
      ->group("Training recipe");
  value(cmd, "--adam-beta1", f.adam_beta1, "FLOAT", "AdamW's beta1")
      ->default_str("0.9")
      ->group("Training recipe");
  value(cmd, "--adam-beta2", f.adam_beta2, "FLOAT", "AdamW's beta2")
      ->default_str("0.999")
      ->group("Training recipe");
  value(cmd, "--adam-eps", f.adam_eps, "FLOAT", "AdamW's eps")
      ->default_str("1e-8")
      ->group("Training recipe");
}

}  // namespace

void register_recipe_flags(CLI::App* cmd, RecipeFlags& f) {
  register_schedule(cmd, f);
  register_gradients(cmd, f);
  register_adamw(cmd, f);
}

void apply_recipe_flags(const RecipeFlags& f, TrainOptions& o) {
  TrainingRecipe& r = o.recipe;
  r.lr_decay = parse_lr_decay(f.lr_schedule);
  auto real = [](const char* flag, const std::string& text, double& out) {
    if (!text.empty()) out = parse_real_flag(flag, text);
  };
  auto integer = [](const char* flag, const std::string& text, int& out) {
    if (!text.empty()) out = parse_int_flag(flag, text);
  };
  integer("--lr-warmup-steps", f.lr_warmup_steps, r.lr_warmup_steps);
  if (!f.min_lr.empty()) r.min_lr = parse_real_flag("--min-lr", f.min_lr);
  if (!f.min_lr.empty() && r.lr_decay == LrDecay::Constant) {
    throw UsageError("--min-lr: only with a decaying --lr-schedule (cosine, linear, wsd)");
  }
  integer("--lr-decay-steps", f.lr_decay_steps, r.lr_decay_steps);
  real("--grad-clip", f.grad_clip, r.grad_clip);
  if (!f.grad_clip.empty() && !(r.grad_clip > 0)) {
    throw UsageError("--grad-clip " + f.grad_clip +
                     ": must be above 0 (the largest gradient norm kept)");
  }
  r.log_grad_norm = f.log_grad_norm;
  integer("--grad-accum-steps", f.grad_accum_steps, r.grad_accum_steps);
  if (!f.total_batch_tokens.empty()) {
    r.total_batch_tokens =
        static_cast<std::int64_t>(parse_uint64_flag("--total-batch-tokens", f.total_batch_tokens));
    if (r.total_batch_tokens == 0) {
      throw UsageError("--total-batch-tokens 0: must be a positive multiple of the micro-batch");
    }
  }
  real("--weight-decay", f.weight_decay, r.weight_decay);
  real("--adam-beta1", f.adam_beta1, r.adam_beta1);
  real("--adam-beta2", f.adam_beta2, r.adam_beta2);
  real("--adam-eps", f.adam_eps, r.adam_eps);
  if (f.decay_params != "all" && f.decay_params != "matrices") {
    throw UsageError("--decay-params " + f.decay_params + ": expected all or matrices");
  }
  r.decay_matrices_only = f.decay_params == "matrices";
}

}  // namespace tinyllama::cli
