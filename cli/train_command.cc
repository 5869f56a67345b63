#include "train_command.h"

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_suite/run_comparison.h"
#include "core/errors.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "option_value.h"
#include "parallel_run.h"
#include "prof/gpu_clocks.h"
#include "progress_line.h"
#include "train/flag_values.h"
#include "train/interrupt.h"
#include "train/report.h"
#include "train/run_setup.h"
#include "train/trainer.h"
#include "train_flags.h"
#include "validate_setup.h"

namespace tinyllama::cli {

namespace {

// --use-amp, --amp-dtype and the FP8 flags, each checked even where it
// does not apply, so a typo is never silently ignored.
void apply_precision_flags(const TrainArgs& a, PlanRequest& request) {
  const Precision amp = parse_amp_dtype(a.amp_dtype);
  request.precision = a.use_amp ? amp : Precision::fp32();
  request.fp8_gemms = parse_fp8_gemms(a.fp8_gemms);
  if (a.fp8_gemms != "auto" && !request.precision.fp8_linears) {
    throw UsageError("--fp8-gemms: only under --use-amp --amp-dtype float8");
  }
  request.fp8_scaling = parse_fp8_scaling(a.fp8_scaling);
  if (a.fp8_scaling != "delayed" && !request.precision.fp8_linears) {
    throw UsageError("--fp8-scaling: only under --use-amp --amp-dtype float8");
  }
}

}  // namespace

TrainOptions to_train_options(const TrainArgs& a) {
  TrainOptions o;
  ModelConfig& m = o.model;
  m.vocab_size = parse_int_flag("--vocab-size", a.vocab_size);
  m.hidden_dim = parse_int_flag("--hidden-dim", a.hidden_dim);
  m.num_layers = parse_int_flag("--num-layers", a.num_layers);
  m.num_heads = parse_int_flag("--num-heads", a.num_heads);
  m.num_kv_heads = a.num_kv_heads.empty() ? ModelConfig::default_kv_heads(m.num_heads)
                                          : parse_int_flag("--num-kv-heads", a.num_kv_heads);
  m.ffn_dim = a.ffn_dim.empty() ? ModelConfig::default_ffn_dim(m.hidden_dim)
                                : parse_int_flag("--ffn-dim", a.ffn_dim);
  o.shape.seq = parse_int_flag("--seq-len", a.seq_len);
  o.shape.batch = parse_int_flag("--batch-size", a.batch_size);
  o.num_steps = parse_int_flag("--num-steps", a.num_steps);
  o.warmup_steps = parse_int_flag("--warmup-steps", a.warmup_steps);
  o.learning_rate = parse_real_flag("--learning-rate", a.learning_rate);
  o.seed = parse_uint64_flag("--seed", a.seed);
  if (!a.data_seed.empty()) o.data_seed = parse_uint64_flag("--data-seed", a.data_seed);
  o.log_every = parse_int_flag("--log-every", a.log_every);

  o.request.level = a.level;
  o.request.ops = apply_toggle_flags(level_preset(a.level), a.toggles);
  if (!a.loss_chunk_rows.empty()) {
    if (o.request.ops.loss != LossImpl::Chunked) {
      throw UsageError(
          "--loss-chunk-rows: needs the chunked loss (--loss chunked, or --version v3 or v4)");
    }
    o.request.loss_chunk_rows = parse_int_flag("--loss-chunk-rows", a.loss_chunk_rows);
    if (o.request.loss_chunk_rows < 1) {
      throw UsageError("--loss-chunk-rows " + a.loss_chunk_rows + ": expected at least 1");
    }
  }
  apply_precision_flags(a, o.request);
  if (!a.device.empty()) o.device_request = parse_device(a.device);

  apply_run_flags(a.run, o);
  apply_recipe_flags(a.recipe, o);
  o.json_path = a.json_path;
  o.save_weights = a.save_weights;
  o.init_from = a.init_from;
  o.export_hf = a.export_hf;
  o.dump_dir = a.dump_dir;
  // The profile settings mean nothing without --profile: refused rather
  // than silently ignored.
  const bool profile = a.profile || a.enable_all_profiling;
  if (!profile && !a.profile_dir.empty()) throw UsageError("--profile-dir: needs --profile");
  if (!profile && !a.profile_steps.empty()) throw UsageError("--profile-steps: needs --profile");
  if (!profile && a.profile_api_calls) throw UsageError("--profile-api-calls: needs --profile");
  o.profile_api_calls = a.profile_api_calls || a.enable_all_profiling;
  if (!profile && a.profile_counters) throw UsageError("--profile-counters: needs --profile");
  if (!profile && !a.explain_kernel.empty()) throw UsageError("--explain-kernel: needs --profile");
  o.profile_counters = a.profile_counters || !a.explain_kernel.empty();
  o.explain_kernel = a.explain_kernel;
  o.profile = profile;
  o.memory_profile = a.memory_profile;
  for (const std::string& name : a.inject) add_fault(o.faults, name);
  o.log_logit_stats = a.log_logit_stats;
  o.validate_setup = a.validate_setup;
  if (!a.profile_dir.empty()) o.profile_dir = a.profile_dir;
  // The workshop's catch-all also writes the memory timeline, beside the
  // profile's files unless --enable-memory-profiling names a file. The folder
  // is made now so the output checks before training can see it (the
  // profiler would make it anyway); if it cannot be made, they say why.
  if (a.enable_all_profiling && o.memory_profile.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.profile_dir, ec);
    o.memory_profile = (std::filesystem::path(o.profile_dir) / "memory_timeline.json").string();
  }
  if (!a.profile_steps.empty())
    o.profile_steps = parse_int_flag("--profile-steps", a.profile_steps);
  return o;
}

TrainCommand::TrainCommand(CLI::App& app)
    : cmd_(app.add_subcommand(
          "train", "train Tiny LLaMA on synthetic tokens or --data and report its speed")) {
  register_train_flags(cmd_, args_);
  cmd_->footer(
      "Level toggles apply independently of their order: the --version preset first, then "
      "--enable/--disable-all-fusion, then the single toggles. The run header prints the "
      "resolved plan (each op's implementation) and every choice that fell back on this device "
      "or at these shapes, with the reason; --json has it under \"plan\".");
}

namespace {

ParallelRequest parallel_request(const TrainArgs& a) {
  ParallelRequest r;
  if (!a.gpus.empty()) {
    r.gpus = parse_int_flag("--gpus", a.gpus);
    if (r.gpus < 1) throw UsageError("--gpus " + a.gpus + ": expected at least 1");
  }
  if (a.zero_stage != "0" && a.zero_stage != "1") {
    throw UsageError("--zero-stage " + a.zero_stage + ": expected 0 or 1");
  }
  r.zero1 = a.zero_stage == "1";
  return r;
}

// --compare-with-v1: the earlier report, read before the run so that a bad
// file is refused at once.
std::optional<suite::EarlierRun> earlier_run(const std::string& file) {
  if (file.empty()) return std::nullopt;
  return suite::read_earlier_run(file, read_json_file("--compare-with-v1", file));
}

// Trains, printing the step, warm-up and note lines as they come (the
// progress line between them).
TrainSummary train_printing(const TrainOptions& opts, ProgressLine& progress,
                            Collectives* collectives) {
  return train(
      opts,
      [&progress](const StepRecord& rec, const TrainOptions& o, const TrainSummary& so_far) {
        if (should_log_step(rec.step, o)) {
          progress.clear();
          std::cout << format_step_line(rec, o, so_far.peak_mb) << std::endl;
        }
        print_exercise_lines(rec, o, /*warmup=*/false, progress);
        progress.step_done(o.warmup_steps + rec.step, rec.ms);
      },
      [&progress](const std::string& line) {
        progress.clear();
        std::cout << line << std::endl;
      },
      [&progress](const StepRecord& rec, const TrainOptions& o) {
        if (should_log_warmup(rec.step, o)) {
          progress.clear();
          std::cout << format_warmup_line(rec, o) << std::endl;
        }
        print_exercise_lines(rec, o, /*warmup=*/true, progress);
        progress.step_done(rec.step, rec.ms);
      },
      collectives);
}

// --compare-with-v1: this run against the earlier one, its line printed.
suite::RunComparison compare_with(const suite::EarlierRun& earlier, const TrainSummary& summary) {
  std::optional<double> sm_mhz;
  if (summary.clocks) {
    const nlohmann::json clocks = prof::clocks_summary(*summary.clocks);
    if (clocks.contains("sm_mhz_median")) sm_mhz = clocks["sm_mhz_median"].get<double>();
  }
  const suite::RunComparison versus{earlier, summary.ms_per_step, summary.peak_mb, sm_mhz};
  std::cout << versus.summary_line();
  return versus;
}

// --json: the report (with the comparison under its own key). Throws
// RuntimeFailure when it cannot be written.
void write_report(const TrainOptions& opts, const TrainSummary& summary,
                  const std::optional<suite::RunComparison>& versus) {
  std::cout.flush();  // --json /dev/stdout comes after the summary
  if (versus) {
    // The report with the comparison added under its own key.
    nlohmann::json report = json_report(summary, opts);
    report["compare_with_v1"] = versus->to_json();
    const std::string text = report.dump(2) + "\n";
    write_atomically("--json", opts.json_path, [&](FileSink& out) { out.write(text); });
  } else {
    write_json_report(opts.json_path, summary, opts);
  }
  // Nothing more on a stdout the report went to: a redirected stdout
  // would write over it (the report appends, stdout keeps its offset).
  if (!written_in_place(opts.json_path)) std::cout << "wrote " << opts.json_path << "\n";
}

// The failures, one line each; the last is thrown.
void report_failures(const std::vector<std::string>& failures) {
  if (failures.empty()) return;
  for (std::size_t i = 0; i + 1 < failures.size(); ++i) {
    std::cout.flush();
    std::cerr << "error: " << failures[i] << std::endl;
  }
  throw RuntimeFailure(failures.back());
}

}  // namespace

int TrainCommand::run() const {
  TrainOptions opts = to_train_options(args_);
  if (opts.validate_setup) {
    if (!args_.gpus.empty())
      throw UsageError("--validate-setup: checks one device; leave out --gpus");
    return run_validate_setup(opts);
  }
  const std::optional<suite::EarlierRun> earlier = earlier_run(args_.compare_with_v1);
  const ParallelRequest parallel = parallel_request(args_);
  if (const std::optional<int> code = launch_ranks_if_asked(parallel)) return *code;
  const std::optional<dist::RankEnv> rank = this_rank(parallel);
  if (rank) prepare_rank(*rank, parallel, opts);
  const std::vector<std::string> notes = resolve_run(opts);
  if (!rank || rank->rank == 0) {
    for (const std::string& note : notes) std::cerr << "note: " << note << std::endl;
  }
  // Every rank has checked its options and device before they meet.
  const std::unique_ptr<Collectives> collectives = rank ? join_ranks(*rank) : nullptr;
  if (collectives) adopt_rank0_attention(opts, *collectives);

  std::cout << format_run_header(opts) << std::endl;
  ProgressLine progress(opts);  // a terminal's ETA line between the step lines
  // From here a first Ctrl-C or SIGTERM ends the run after the step in
  // flight, with everything below still written (train/interrupt.h).
  const InterruptGuard interrupts(rank ? rank->launcher_pid : 0);
  const TrainSummary summary = train_printing(opts, progress, collectives.get());
  progress.clear();
  if (summary.stop == TrainSummary::Stop::Interrupted) {
    std::cout << "interrupted by " << (summary.signal == SIGINT ? "SIGINT" : "SIGTERM")
              << " after step " << summary.steps_done << " (warm-up included)"
              << (summary.checkpoint.empty() ? "" : "; resume with --resume " + opts.checkpoint_dir)
              << "\n";
  }
  std::cout << format_summary(summary, opts);
  std::optional<suite::RunComparison> versus;
  if (earlier) versus = compare_with(*earlier, summary);
  std::cout << summary.profile_report;
  std::cout << summary.memory_profile_report;
  // Everything finished is reported before any failure: the summary above,
  // then the JSON report, then the failures, one line each.
  std::vector<std::string> failures;
  if (!opts.json_path.empty() && (!rank || rank->rank == 0)) {
    try {
      write_report(opts, summary, versus);
    } catch (const RuntimeFailure& e) {
      failures.emplace_back(e.what());
    }
  }
  if (!summary.save_error.empty()) failures.push_back(summary.save_error);
  if (summary.stop == TrainSummary::Stop::Diverged) failures.push_back(summary.stop_message);
  report_failures(failures);
  if (summary.stop == TrainSummary::Stop::Interrupted) return interrupt_exit_code(summary.signal);
  return 0;
}

}  // namespace tinyllama::cli
