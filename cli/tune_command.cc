#include "tune_command.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_suite/child_run.h"
#include "bench_suite/results.h"
#include "core/errors.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "option_value.h"
#include "train/batch_tune.h"
#include "train/flag_values.h"
#include "train/memory_check.h"
#include "train/report.h"
#include "train/run_setup.h"

namespace tinyllama::cli {
namespace {

void register_flags(CLI::App* cmd, TuneArgs& a) {
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  TrainArgs& t = a.train;
  value(cmd, "--max-memory", a.max_memory, "GB",
        "the memory target in GB (1e9 bytes): the largest batch whose planned peak (parameters, "
        "gradients, AdamW state, activation arena, workspaces: the figure train reports as peak) "
        "is at most this")
      ->required()
      ->group("Tuning");
  value(cmd, "--batches", a.batches, "LIST",
        "batch sizes to measure, comma-separated and increasing, e.g. 1,2,4,8 (those over the "
        "target are listed, not run)")
      ->default_str("powers of two up to the largest that fits, and that one")
      ->group("Tuning");
  value(cmd, "--warmup-steps", a.warmup_steps, "INT", "untimed steps of each measured run")
      ->group("Tuning");
  value(cmd, "--num-steps", a.num_steps, "INT", "timed steps of each measured run")
      ->group("Tuning");
  value(cmd, "--json", a.json_path, "FILE", "write the table and both answers as JSON")
      ->group("Tuning");

  value(cmd, "--vocab-size", t.vocab_size, "INT", "vocabulary")->group("Model");
  value(cmd, "--hidden-dim", t.hidden_dim, "INT", "hidden size D")->group("Model");
  value(cmd, "--num-layers", t.num_layers, "INT", "transformer blocks")->group("Model");
  value(cmd, "--num-heads", t.num_heads, "INT", "query heads H")->group("Model");
  value(cmd, "--num-kv-heads", t.num_kv_heads, "INT", "key/value heads K; must divide H")
      ->default_str("H/2, or H when H is odd")
      ->group("Model");
  value(cmd, "--ffn-dim", t.ffn_dim, "INT", "SwiGLU inner size F")
      ->default_str("4*D")
      ->group("Model");
  value(cmd, "--seq-len", t.seq_len, "INT", "tokens per row")->group("Model");
  value(cmd, "--seed", t.seed, "INT", "seeds the weights and the synthetic data of each run")
      ->group("Model");
  value(cmd, "--version", t.level, "LEVEL", "level preset: v1, v2, v3 or v4")->group("Run");
  value(cmd, "--precision", a.precision, "{fp32,bf16,fp16}",
        "fp32, or AMP with bf16 or fp16 compute (CUDA only)")
      ->group("Run");
  value(cmd, "--device", t.device, "{cpu,cuda}", "where to run")
      ->default_str("cuda if a GPU is found, else cpu")
      ->group("Run");
}

std::int64_t parse_max_memory(const std::string& text) {
  const double gb = parse_real_flag("--max-memory", text);
  if (!(gb > 0) || !std::isfinite(gb) || gb > 1e6) {
    throw UsageError("--max-memory " + text + ": expected a size in GB above 0, e.g. 40 or 0.5");
  }
  return static_cast<std::int64_t>(gb * 1e9);
}

// The train command line that measures `batch`, its summary to json_path:
// the model and point flags as the bench writes them (suite::ModelFlags,
// suite::BenchPoint), then the seed, the step counts and the output.
std::vector<std::string> point_args(const TuneArgs& a, const TrainOptions& base, int batch,
                                    const std::string& json_path) {
  const ModelConfig& m = base.model;
  const suite::ModelFlags model{m.vocab_size, m.hidden_dim,   m.num_layers,
                                m.num_heads,  m.num_kv_heads, m.ffn_dim};
  const suite::BenchPoint point{base.request.level, a.precision, batch, base.shape.seq, {}};
  std::vector<std::string> args{"train", "--device", device_name(base.plan.device)};
  for (const std::vector<std::string>& part : {model.train_args(), point.train_args()}) {
    args.insert(args.end(), part.begin(), part.end());
  }
  args.insert(args.end(), {"--seed", std::to_string(base.seed), "--warmup-steps", a.warmup_steps,
                           "--num-steps", a.num_steps, "--json", json_path});
  return args;
}

// Runs one point and fills its measurement or its failure.
void measure(TunePoint& p, const TuneArgs& a, const TrainOptions& base,
             const std::filesystem::path& dir) {
  const std::string json_path = (dir / ("batch" + std::to_string(p.batch) + ".json")).string();
  // The child's stdout is dropped; its stderr is kept for the failure line.
  const std::string err_path = (dir / ("batch" + std::to_string(p.batch) + ".err")).string();
  const suite::ChildResult r = suite::run_child(
      "/proc/self/exe", point_args(a, base, p.batch, json_path), "/dev/null", err_path, 0);
  if (r.exit_code != 0) {
    const std::string last_error = r.exit_code == 127 && r.last_line.empty()
                                       ? std::string("could not run /proc/self/exe")
                                       : r.last_line;
    p.status = "failed: exit " + std::to_string(r.exit_code) +
               (last_error.empty() ? "" : " (" + last_error + ")");
    return;
  }
  const nlohmann::json j = read_json_object(json_path);
  if (!j.contains("tokens_per_s")) {
    p.status = "failed: no summary from the run";
    return;
  }
  // The run must be the configuration the prediction was made for: a point
  // measured at another precision (or level) would rank batches wrongly.
  const std::string want = precision_name(base.plan.precision);
  const std::string got = j.contains("config") ? j["config"].value("precision", "") : "";
  if (got != want) {
    p.status = "failed: the run trained in " + got + ", not " + want;
    return;
  }
  p.measured = true;
  p.status = "ok";
  p.tokens_per_s = j["tokens_per_s"].get<double>();
  p.ms_per_step = j["ms_per_step"].get<double>();
  p.peak_mb = j["peak_mb"].get<double>();
  p.device_used_peak_mb = j["device_used_peak_mb"].get<double>();
}

// The arguments of each measured train run: --precision as train's AMP
// flags, the tune's step counts, batch 1 until a point sets its own.
TuneArgs run_args(const TuneArgs& a) {
  TuneArgs with_steps = a;
  TrainArgs& t = with_steps.train;
  if (a.precision == "bf16" || a.precision == "fp16") {
    t.use_amp = true;
    t.amp_dtype = a.precision == "bf16" ? "bfloat16" : "float16";
  } else if (a.precision != "fp32") {
    throw UsageError("--precision " + a.precision + ": expected fp32, bf16 or fp16");
  }
  t.batch_size = "1";
  t.warmup_steps = a.warmup_steps;
  t.num_steps = a.num_steps;
  return with_steps;
}

// The largest batch under the target, and the candidate points: each one's
// predicted peak and whether it is to be run.
void plan_points(const TrainOptions& base, const std::vector<int>& asked, TuneResult& result) {
  // Batches are drawn distinct from the synthetic pool: at most its rows.
  result.largest_batch = largest_fitting_batch(base, result.max_bytes, base.data_pool_rows);
  if (result.largest_batch > 0) {
    result.largest_batch_bytes = predicted_peak_bytes(base, result.largest_batch);
  }
  for (const int b : candidate_batches(asked, result.largest_batch)) {
    TunePoint p;
    p.batch = b;
    p.predicted_bytes = b <= base.data_pool_rows ? predicted_peak_bytes(base, b) : 0;
    p.fits = b <= result.largest_batch;
    p.status = p.fits ? "pending" : "skipped (over --max-memory)";
    if (b > base.data_pool_rows) {
      p.status = "skipped (over the " + std::to_string(base.data_pool_rows) + "-row data pool)";
    }
    result.points.push_back(p);
  }
}

void print_header(const TrainOptions& base, const TuneResult& result) {
  std::cout << "tune | model D" << base.model.hidden_dim << " L" << base.model.num_layers << " H"
            << base.model.num_heads << " K" << base.model.num_kv_heads << " F" << base.model.ffn_dim
            << " vocab " << base.model.vocab_size << " | seq " << base.shape.seq << " | "
            << base.plan.level << " | " << precision_name(base.plan.precision) << " | "
            << device_name(base.plan.device) << " | target " << format_bytes(result.max_bytes)
            << std::endl;
}

// Measures every point that fits, in a temporary directory, with a line
// (and an ETA) after each.
void measure_points(TuneResult& result, const TuneArgs& with_steps, const TrainOptions& base) {
  int to_run = 0;
  for (const TunePoint& p : result.points) to_run += p.fits ? 1 : 0;
  char dir_template[] = "/tmp/tinyllama-tune-XXXXXX";
  if (mkdtemp(dir_template) == nullptr)
    throw RuntimeFailure("tune: cannot make a temporary directory");
  const std::filesystem::path dir(dir_template);
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  try {
    for (TunePoint& p : result.points) {
      if (!p.fits) continue;
      measure(p, with_steps, base, dir);
      ++done;
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      char rate[64];
      std::snprintf(rate, sizeof rate, "%.0f tokens/s", p.tokens_per_s);
      char line[512];
      std::snprintf(line, sizeof line, "tune %d/%d | batch %d | %s | ETA %s", done, to_run, p.batch,
                    p.measured ? rate : p.status.c_str(),
                    format_duration(elapsed / done * (to_run - done)).c_str());
      std::cout << line << std::endl;
    }
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

TuneCommand::TuneCommand(CLI::App& app)
    : cmd_(app.add_subcommand("tune",
                              "find the largest batch size under a memory target and the batch "
                              "size with the best tokens/s (measured)")) {
  register_flags(cmd_, args_);
  cmd_->footer(
      "The largest batch comes from the plan's exact memory arithmetic (no run needed); each "
      "candidate batch is then measured by a short train run in a child process (--warmup-steps "
      "+ --num-steps on synthetic data), so a run that fails costs only its own point.");
}

int TuneCommand::run() const {
  const TuneArgs& a = args_;
  const TuneArgs with_steps = run_args(a);
  TuneResult result;
  result.max_bytes = parse_max_memory(a.max_memory);
  const std::vector<int> asked =
      a.batches.empty() ? std::vector<int>() : parse_batch_list(a.batches);
  TrainOptions base = to_train_options(with_steps.train);
  if (base.num_steps < 1) throw UsageError("--num-steps " + a.num_steps + ": expected at least 1");
  check_output_path("--json", a.json_path);
  for (const std::string& note : resolve_run(base)) std::cout << "note: " << note << "\n";

  const std::int64_t available = available_memory_bytes(base.plan.device);
  if (available >= 0 && result.max_bytes > available) {
    std::cout << "note: --max-memory " << a.max_memory << " is above what the "
              << device_name(base.plan.device) << " has "
              << (base.plan.device == DeviceKind::Cuda ? "free" : "available") << " ("
              << format_bytes(available) << "): a batch between the two fails when it runs\n";
  }
  plan_points(base, asked, result);
  print_header(base, result);
  measure_points(result, with_steps, base);
  result.best = best_point(result.points);
  std::cout << format_tune_table(result);
  if (!a.json_path.empty()) {
    const std::string text = tune_json(result, base).dump(2) + "\n";
    write_atomically("--json", a.json_path, [&](FileSink& out) { out.write(text); });
    if (!written_in_place(a.json_path)) std::cout << "wrote " << a.json_path << "\n";
  }
  if (result.largest_batch == 0) {
    throw RuntimeFailure("--max-memory " + a.max_memory + ": not even batch 1 fits (it needs " +
                         format_bytes(predicted_peak_bytes(base, 1)) + ")");
  }
  if (result.best < 0) throw RuntimeFailure("tune: no candidate batch ran to the end");
  return 0;
}

}  // namespace tinyllama::cli
