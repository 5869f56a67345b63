#include "run_flags.h"

#include "core/errors.h"
#include "option_value.h"
#include "train/flag_values.h"

namespace tinyllama::cli {

void register_run_flags(CLI::App* cmd, RunFlags& f) {
  cmd->add_option("--data", f.data,
                  "train on these files instead of synthetic tokens: llm.c token shards "
                  "(magic 20240520, uint16 tokens) or UTF-8 text (byte-level tokenizer: 256 "
                  "bytes + end-of-text, needs --vocab-size >= 257); each a path or a quoted "
                  "glob, e.g. 'data/train_*.bin'")
      ->type_name("PATH")
      ->expected(1, -1)
      ->group("Data");
  cmd->add_option("--val-data", f.val_data,
                  "held-out files for --eval-every (else the last --val-fraction of each "
                  "--data file is held out)")
      ->type_name("PATH")
      ->expected(1, -1)
      ->group("Data");
  value(cmd, "--val-fraction", f.val_fraction, "FLOAT",
        "share of each --data file (its tail) held out for --eval-every, in (0, 1)")
      ->default_str("0.1")
      ->group("Data");
  value(cmd, "--eval-every", f.eval_every, "INT",
        "print the validation loss every N timed steps and at the end (needs --data)")
      ->group("Data");
  value(cmd, "--eval-steps", f.eval_steps, "INT",
        "validation batches per evaluation (the same batches every time)")
      ->default_str("10")
      ->group("Data");

  value(cmd, "--checkpoint-dir", f.checkpoint_dir, "DIR",
        "write checkpoints here (created if missing): weights, AdamW state, step, data "
        "position, loss scale; at the end, on Ctrl-C/SIGTERM and every --checkpoint-every steps")
      ->group("Checkpoints");
  value(cmd, "--checkpoint-every", f.checkpoint_every, "INT",
        "a checkpoint every N steps (warm-up steps count)")
      ->group("Checkpoints");
  value(cmd, "--keep", f.keep, "INT", "keep the newest K checkpoints (0: all)")
      ->default_str("3")
      ->group("Checkpoints");
  value(cmd, "--resume", f.resume, "DIR",
        "continue from the newest checkpoint in DIR, bit-identical to a run never stopped (the "
        "model, batch, precision, learning rate, seed and data must be the same; --num-steps "
        "may grow)")
      ->group("Checkpoints");
}

void apply_run_flags(const RunFlags& f, TrainOptions& o) {
  o.data = f.data;
  o.val_data = f.val_data;
  if (!f.eval_every.empty()) o.eval_every = parse_int_flag("--eval-every", f.eval_every);
  if (!f.eval_steps.empty()) o.eval_steps = parse_int_flag("--eval-steps", f.eval_steps);
  if (!f.val_fraction.empty()) o.val_fraction = parse_real_flag("--val-fraction", f.val_fraction);
  auto needs = [](bool given, const char* flag, bool other, const char* other_flag) {
    if (given && !other) throw UsageError(std::string(flag) + ": needs " + other_flag);
  };
  needs(!f.eval_every.empty(), "--eval-every", !f.data.empty(), "--data");
  needs(!f.val_data.empty(), "--val-data", !f.eval_every.empty(), "--eval-every");
  needs(!f.val_fraction.empty(), "--val-fraction", !f.eval_every.empty(), "--eval-every");
  needs(!f.eval_steps.empty(), "--eval-steps", !f.eval_every.empty(), "--eval-every");
  if (!f.val_fraction.empty() && !f.val_data.empty()) {
    throw UsageError("--val-fraction: not with --val-data (which is the held-out data)");
  }

  o.checkpoint_dir = f.checkpoint_dir;
  o.resume = f.resume;
  needs(!f.checkpoint_every.empty(), "--checkpoint-every", !f.checkpoint_dir.empty(),
        "--checkpoint-dir");
  needs(!f.keep.empty(), "--keep", !f.checkpoint_dir.empty(), "--checkpoint-dir");
  if (!f.checkpoint_every.empty()) {
    o.checkpoint_every = parse_int_flag("--checkpoint-every", f.checkpoint_every);
  }
  if (!f.keep.empty()) o.keep_checkpoints = parse_int_flag("--keep", f.keep);
}

}  // namespace tinyllama::cli
