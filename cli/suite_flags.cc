#include "suite_flags.h"

#include "bench_suite/environment.h"
#include "core/errors.h"
#include "io/atomic_file.h"
#include "model/config.h"
#include "option_value.h"
#include "train/flag_values.h"

namespace tinyllama::cli {

void register_suite_flags(CLI::App* cmd, SuiteFlags& f, const std::string& default_out) {
  value(cmd, "--vocab-size", f.vocab_size, "INT", "vocabulary size of every run")->group("Model");
  value(cmd, "--hidden-dim", f.hidden_dim, "INT", "hidden size D of every run")->group("Model");
  value(cmd, "--num-layers", f.num_layers, "INT", "transformer blocks L")->group("Model");
  value(cmd, "--num-heads", f.num_heads, "INT", "query heads H")->group("Model");
  value(cmd, "--num-kv-heads", f.num_kv_heads, "INT", "key/value heads K (GQA)")
      ->default_str("H/2, or H when H is odd")
      ->group("Model");
  value(cmd, "--ffn-dim", f.ffn_dim, "INT", "SwiGLU inner size F")
      ->default_str("4*D")
      ->group("Model");
  value(cmd, "--num-steps", f.num_steps, "INT",
        "timed steps of every run (train's --num-steps; the peer's too)")
      ->group("Runs");
  value(cmd, "--warmup-steps", f.warmup_steps, "INT", "untimed warm-up steps before them")
      ->group("Runs");
  value(cmd, "--device", f.device, "{cpu,cuda}", "where every run trains")
      ->default_str("train's: cuda if a CUDA device is found, else cpu")
      ->group("Runs");
  value(cmd, "--timeout", f.timeout, "SECONDS",
        "a run still going after this long is stopped and recorded as failed (0: no limit)")
      ->group("Runs");
  f.out = default_out;
  value(cmd, "--out", f.out, "DIR",
        "output directory (created if missing): the report files, plots, and each run's "
        "train.json and logs under points/")
      ->group("Output");
}

suite::RunSettings to_run_settings(const SuiteFlags& f) {
  suite::RunSettings s;
  suite::ModelFlags& m = s.model;
  m.vocab_size = parse_int_flag("--vocab-size", f.vocab_size);
  m.hidden_dim = parse_int_flag("--hidden-dim", f.hidden_dim);
  m.num_layers = parse_int_flag("--num-layers", f.num_layers);
  m.num_heads = parse_int_flag("--num-heads", f.num_heads);
  if (m.num_heads < 1) throw UsageError("--num-heads " + f.num_heads + ": expected at least 1");
  if (!f.num_kv_heads.empty()) m.num_kv_heads = parse_int_flag("--num-kv-heads", f.num_kv_heads);
  if (!f.ffn_dim.empty()) m.ffn_dim = parse_int_flag("--ffn-dim", f.ffn_dim);
  ModelConfig config;  // refused here once, not by every run
  config.vocab_size = m.vocab_size;
  config.hidden_dim = m.hidden_dim;
  config.num_layers = m.num_layers;
  config.num_heads = m.num_heads;
  config.num_kv_heads = m.kv_heads();
  config.ffn_dim = m.ffn();
  config.validate();
  s.num_steps = parse_int_flag("--num-steps", f.num_steps);
  s.warmup_steps = parse_int_flag("--warmup-steps", f.warmup_steps);
  if (!f.device.empty()) {
    parse_device(f.device);  // the one-line error for a bad value, before any run
    s.device = f.device;
  }
  s.timeout_s = parse_real_flag("--timeout", f.timeout);
  if (s.timeout_s < 0) throw UsageError("--timeout " + f.timeout + ": expected seconds >= 0");
  if (f.out.empty()) throw UsageError("--out: expected a directory");
  check_output_directory("--out", f.out);  // refused before the first run, not after it
  s.out_dir = f.out;
  s.peer_script = suite::source_tree() + "/scripts/peer/torch_peer.py";
  return s;
}

}  // namespace tinyllama::cli
