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
#include "validate_setup.h"

namespace tinyllama::cli {
namespace {

void toggle(CLI::App* cmd, const std::string& name, TogglePair& pair, const std::string& what) {
  cmd->add_flag("--enable-" + name, pair.enable,
                "turn " + what + " on (overrides the --version preset)");
  cmd->add_flag("--disable-" + name, pair.disable,
                "turn " + what + " off (overrides the --version preset)");
}

// The model's shape.
void model_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--vocab-size", a.vocab_size, "INT", "vocabulary size (>= 2)")->group("Model");
  value(cmd, "--hidden-dim", a.hidden_dim, "INT", "hidden size D; D / num-heads must be even")
      ->group("Model");
  value(cmd, "--num-layers", a.num_layers, "INT", "transformer blocks L")->group("Model");
  value(cmd, "--num-heads", a.num_heads, "INT", "query heads H")->group("Model");
  value(cmd, "--num-kv-heads", a.num_kv_heads, "INT", "key/value heads K (GQA); must divide H")
      ->default_str("H/2, or H when H is odd")
      ->group("Model");
  value(cmd, "--ffn-dim", a.ffn_dim, "INT", "SwiGLU inner size F")
      ->default_str("4*D")
      ->group("Model");
}

// The step's shape, its length and the optimizer's rate.
void training_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--seq-len", a.seq_len, "INT", "tokens per row S (>= 2)")->group("Training");
  value(cmd, "--batch-size", a.batch_size, "INT",
        "rows per step B; each step draws B distinct rows of a 1000-row synthetic pool")
      ->group("Training");
  value(cmd, "--num-steps", a.num_steps, "INT", "timed training steps")->group("Training");
  value(cmd, "--warmup-steps", a.warmup_steps, "INT",
        "untimed steps before the timed ones (they train too)")
      ->group("Training");
  value(cmd, "--learning-rate", a.learning_rate, "FLOAT", "AdamW learning rate")->group("Training");
  value(cmd, "--seed", a.seed, "UINT", "seed of the initial weights and the synthetic data")
      ->group("Training");
}

// Where and how the steps run: ranks, device, level preset, precision and
// the fusion toggles.
void execution_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--gpus", a.gpus, "INT",
        "data parallel on N GPUs of this host: starts one process per GPU (NCCL), each "
        "training --batch-size rows of every global batch of N*B rows; only rank 0 prints and "
        "writes. Under torchrun/mpirun leave it out: RANK, WORLD_SIZE, LOCAL_RANK and "
        "MASTER_ADDR/MASTER_PORT are read from the environment")
      ->group("Execution");
  value(cmd, "--zero-stage", a.zero_stage, "{0,1}",
        "with several ranks: 1 shards AdamW's state (ZeRO-1: gradients reduce-scattered, each "
        "rank updates its shard, weights all-gathered), 0 all-reduces the gradients")
      ->group("Execution");
  value(cmd, "--device", a.device, "{cpu,cuda}", "where to train")
      ->default_str("cuda if a CUDA device is found, else cpu")
      ->group("Execution");
  value(cmd, "--version", a.level, "{v1,v2,v3,v4}",
        "optimisation level preset (workshop name): v1 baseline, v2 fused + flash attention + "
        "CUDA graphs, v3 v2 + custom fused kernels (residual add + RMSNorm, chunked loss, RoPE's "
        "backward in the flash kernels, activations recomputed where large, gradients in a "
        "two-layer ring), v4 v3 + residual adds in the GEMM epilogues + attention timed per "
        "shape (flash or cuDNN)")
      ->group("Execution");
  cmd->add_flag("--use-amp", a.use_amp,
                "mixed precision: --amp-dtype compute, fp32 master weights and optimizer state "
                "(needs --device cuda)")
      ->group("Execution");
  value(cmd, "--amp-dtype", a.amp_dtype, "{bfloat16,float16}",
        "compute dtype under --use-amp; float16 adds dynamic loss scaling")
      ->group("Execution");
  toggle(cmd, "qkv-fusion", a.toggles.qkv_fusion, "the single Q/K/V GEMM");
  toggle(cmd, "swiglu-fusion", a.toggles.swiglu_fusion, "the fused gate/up GEMM and silu*mul");
  toggle(cmd, "flash-attention", a.toggles.flash_attention, "flash attention");
  toggle(cmd, "cuda-graphs", a.toggles.cuda_graphs, "CUDA graph capture of the step");
  toggle(cmd, "fused-optimizer", a.toggles.fused_optimizer,
         "the fused AdamW sweeps (they also write the AMP weight copy; with CUDA graphs, "
         "except fp16, one per layer beside the backward pass)");
}

// The level toggles that pick an implementation per op: attention, norm,
// loss, activations, GEMM epilogue.
void op_choice_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--attention", a.toggles.attention, "{materialized,flash,cudnn,cudnn+flash,auto}",
        "attention implementation, overriding the preset: materialized (S x S scores, v1), "
        "flash (our kernels, v2), cudnn (cuDNN's fused SDPA; bf16/fp16 on CUDA), cudnn+flash "
        "(cuDNN's forward, our backward), auto (times flash and cudnn at start-up, each pass "
        "apart, and keeps the fastest of the three)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--norm", a.toggles.norm, "{plain,fused}",
        "residual add and RMSNorm: plain (an add, then a norm: v1, v2) or fused (one kernel "
        "adds and normalises, forward and backward: v3)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--loss", a.toggles.loss, "{full_logits,chunked}",
        "LM head and cross-entropy: full_logits (all [tokens, vocab] logits, then the loss: v1, "
        "v2) or chunked (per chunk of rows: head GEMM, one loss+gradient kernel, the head's "
        "gradients; the full logits never exist: v3)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--activations", a.toggles.activations, "{stored,recompute_norms,recompute,auto}",
        "what the backward pass reads: stored (every layer keeps its normalised inputs: v1, "
        "v2), recompute_norms (one shared buffer each; the backward pass remakes a layer's from "
        "its saved input and rstd, bit-identical: 2 x [tokens, D] per layer less memory), "
        "recompute (recompute_norms, and the SwiGLU output silu(g)*u in one shared buffer, "
        "remade from the saved gate/up output by the forward's own op, bit-identical: "
        "[tokens, FFN] per layer less again) or auto (recompute where hidden >= 2048 and "
        "tokens x hidden >= 2^22, where it costs ~2 % of the step; stored elsewhere: v3, v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--gemm-epilogue", a.toggles.gemm_epilogue, "{none,residual}",
        "what the GEMMs fold into their output: none (the residual adds are their own ops or "
        "the fused norm's add: v1-v3) or residual (the out- and down-projection GEMMs add into "
        "the residual stream through cuBLASLt's beta = 1, so the norms after them only "
        "normalise: v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
}

// The level toggles that pick an implementation per op: SwiGLU, RoPE,
// gradient buffers, kernel launch, optimizer.
void kernel_choice_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--swiglu", a.toggles.swiglu, "{separate,fused,gemm}",
        "SwiGLU: separate (silu, then a multiply: v1), fused (one kernel each way: v2-v4) or "
        "gemm (inside the GEMMs beside it: the gate/up GEMM writes silu(g)*u beside g and u, and "
        "the down projection's data-gradient GEMM writes d_gate and d_up without storing "
        "d_hidden; a Hopper kernel, bf16/fp16, FFN width a multiple of 64, else fused with a "
        "note; measured slower than fused so far, so no preset takes it: docs/PERFORMANCE.md). "
        "Applied after --enable/--disable-swiglu-fusion")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--rope", a.toggles.rope, "{separate,fused}",
        "RoPE: separate (a rotation pass over q|k forward and over dq|dk backward) or fused "
        "(the backward's rotation inside the flash attention backward, before rounding; the "
        "forward pass stays separate; with another attention it falls back to separate: v3, v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--grad-buffers", a.toggles.grad_buffers, "{full,ring}",
        "where the layers' fp32 gradients live: full (each layer its own, the whole gradient "
        "kept after the step) or ring (two layer-sized slots the layers take turns in, each "
        "freed by its layer's AdamW sweep beside the backward pass: L-2 layers of gradient less "
        "memory; needs the fused_per_layer optimizer, else full with a note, as under "
        "--dump-dir, --validate-setup and --gpus: v3, v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--kernel-launch", a.toggles.kernel_launch, "{plain,pdl,auto}",
        "how the step's own kernels are launched (not the GEMM libraries'): plain (each waits "
        "for the kernel before it: v1-v3), pdl (programmatic dependent launch: a kernel is "
        "scheduled while the one before it finishes and waits on the device for its results, "
        "hiding launch latency; the same bits; sm_90+, else plain with a note) or auto (pdl "
        "under --use-amp, plain in fp32, where it measured slower: v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--optimizer", a.toggles.optimizer, "{per_tensor,fused,fused_per_layer}",
        "AdamW: per_tensor (one launch per parameter tensor, then the AMP weight copy: v1), "
        "fused (one sweep over all parameters after the backward pass, writing the AMP copy as "
        "it goes) or fused_per_layer (fused, each layer's sweep on a branch of the captured "
        "step beside the backward pass as soon as its gradients are final; eager steps and "
        "fp16's loss scaling fall back to fused: v2-v4). Instead of "
        "--enable/--disable-fused-optimizer")
      ->default_str("the preset's")
      ->group("Level toggles");
}

// The chunked loss's rows, the all-fusion toggles, and every fusion toggle
// shown under "Level toggles".
void fusion_group_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--loss-chunk-rows", a.loss_chunk_rows, "INT",
        "rows per chunk of the chunked loss (needs the chunked loss)")
      ->default_str("the fewest chunks of at most 512 MiB of logits each")
      ->group("Level toggles");
  cmd->add_flag("--enable-all-fusion", a.toggles.all_fusion.enable,
                "turn all five toggles on (applied after the preset, before single toggles)");
  cmd->add_flag("--disable-all-fusion", a.toggles.all_fusion.disable,
                "turn all five toggles off (applied after the preset, before single toggles)");
  for (const char* name :
       {"--enable-qkv-fusion", "--disable-qkv-fusion", "--enable-swiglu-fusion",
        "--disable-swiglu-fusion", "--enable-flash-attention", "--disable-flash-attention",
        "--enable-cuda-graphs", "--disable-cuda-graphs", "--enable-fused-optimizer",
        "--disable-fused-optimizer", "--enable-all-fusion", "--disable-all-fusion"}) {
    cmd->get_option(name)->group("Level toggles");
  }
}

// What the run prints and writes.
void output_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--log-every", a.log_every, "INT",
        "print a step line every N steps (step 1 and the last step always); warm-up steps get "
        "'warm-up i/N' lines by the same rule. On a terminal a progress line with the time per "
        "step and an ETA stands between them")
      ->group("Output");
  value(cmd, "--json", a.json_path, "FILE", "write the summary, config and device as JSON")
      ->group("Output");
  value(cmd, "--save-weights", a.save_weights, "FILE",
        "save the trained weights (safetensors, Hugging Face LLaMA names and layout: q/k rows "
        "rotate-half)")
      ->group("Output");
  value(cmd, "--export-hf", a.export_hf, "DIR",
        "save the trained model as a Hugging Face LLaMA directory (config.json + "
        "model.safetensors, and the data's SentencePiece tokenizer beside them when it had one) "
        "that transformers' from_pretrained(DIR) loads as is; DIR is created if missing")
      ->group("Output");
  value(cmd, "--init-from", a.init_from, "FILE|DIR",
        "start from these weights instead of the seeded init: a safetensors file (--save-weights, "
        "older tinyllama files, Hugging Face names) or a Hugging Face LLaMA directory "
        "(--export-hf, or save_pretrained with safetensors) whose config.json matches the model "
        "flags")
      ->group("Output");
  value(cmd, "--dump-dir", a.dump_dir, "DIR",
        "debugging/parity aid: write the initial weights, every timed batch and step 1's "
        "gradients (safetensors) for an independent replay")
      ->group("Output");
}

// --profile and where and what it records.
void profile_flags(CLI::App* cmd, TrainArgs& a) {
  cmd->add_flag("--profile", a.profile,
                "profile N timed steps: kernel statistics (CSV), a Perfetto trace and a summary "
                "with FLOPs, MFU and a roofline (docs/PROFILING.md)")
      ->group("Profiling");
  value(cmd, "--profile-dir", a.profile_dir, "DIR", "where --profile writes its files")
      ->default_str("profile")
      ->group("Profiling");
  value(cmd, "--profile-steps", a.profile_steps, "INT",
        "timed steps --profile records (the first ones after the warm-up)")
      ->default_str("5")
      ->group("Profiling");
}

// The debugging exercises' flags.
void exercise_flags(CLI::App* cmd, TrainArgs& a) {
  cmd->add_option("--inject", a.inject,
                  "exercise fault (docs/EXERCISES.md), repeatable or comma-separated: "
                  "broken-init (weights N(0, 1), not N(0, 0.02)), unsynced-timing (host-clock "
                  "phase times printed beside the event times), naive-swiglu (gate/up "
                  "projections by one thread per output instead of a GEMM), noncontiguous-kv "
                  "(attention forward reading K/V row by row per lane, uncoalesced; needs flash "
                  "attention); on the cpu the last two run the reference loops instead of BLAS")
      ->type_name("NAME")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Debugging exercise");
  cmd->add_flag("--log-logit-stats", a.log_logit_stats,
                "after every step, a line with the mean, std and max of the step's logits "
                "(keeps one step in flight and reads the logits back: slower)")
      ->group("Debugging exercise");
  cmd->add_flag("--validate-setup", a.validate_setup,
                "the quick check: 5 steps of this model, level, precision and device at batch "
                "<= 2, judged (first loss near ln(vocab), finite gradients, step 1 against the "
                "float64 reference when small enough); prints PASS or FAIL, exit 0 or 1")
      ->group("Debugging exercise");
}

// The profiler's options past --profile: API records, memory timeline,
// everything at once.
void profiling_detail_flags(CLI::App* cmd, TrainArgs& a) {
  cmd->add_flag("--profile-api-calls", a.profile_api_calls,
                "eager runs: keep CUPTI's CUDA API records in the profiled steps too (the trace's "
                "CUDA API track and launch arrows from each call); costs a host-bound eager step "
                "much more than the default, which learns the launch order in the warm-up")
      ->group("Profiling");
  cmd->add_option("--enable-memory-profiling", a.memory_profile,
                  "write one step's memory timeline: the bytes live in each activation buffer at "
                  "every op (exact, from the arena plan and the step's accesses), the memory held "
                  "all run (parameters, gradients, AdamW state, workspaces) and the driver's "
                  "sampled usage (CUDA), as JSON to FILE and a plot (SVG) beside it")
      ->type_name("[FILE]")
      ->expected(0, 1)
      ->default_str("memory_timeline.json")
      ->group("Profiling");
  cmd->add_flag(
         "--enable-all-profiling", a.enable_all_profiling,
         "the workshop's flag: every profiling output train has, i.e. --profile with "
         "--profile-api-calls (kernel statistics, trace with the CUDA API track, summary) "
         "and --enable-memory-profiling (memory_timeline.json in the profile folder unless named)")
      ->group("Profiling");
}

void register_flags(CLI::App* cmd, TrainArgs& a) {
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  model_flags(cmd, a);
  training_flags(cmd, a);
  execution_flags(cmd, a);
  op_choice_flags(cmd, a);
  kernel_choice_flags(cmd, a);
  fusion_group_flags(cmd, a);
  register_run_flags(cmd, a.run);
  register_recipe_flags(cmd, a.recipe);
  output_flags(cmd, a);
  profile_flags(cmd, a);
  exercise_flags(cmd, a);
  profiling_detail_flags(cmd, a);
  value(cmd, "--compare-with-v1", a.compare_with_v1, "FILE",
        "an earlier run's --json (any level, the workshop's name): the summary and --json add "
        "this run's speed-up in ms/step and its peak memory ratio against it")
      ->group("Output");
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
  // Checked even without --use-amp, so a typo is never silently ignored.
  const DType amp = parse_amp_dtype(a.amp_dtype);
  o.request.precision = a.use_amp ? Precision::amp(amp) : Precision::fp32();
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
  register_flags(cmd_, args_);
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
