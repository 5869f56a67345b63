#include "kernels_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>
#include <vector>

#include "bench/op_registry.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "core/errors.h"
#include "cuda/cuda_entry.h"
#include "option_value.h"
#include "train/flag_values.h"
#include "train/validate.h"

namespace tinyllama::cli {
namespace {

std::string op_families() {
  std::vector<std::string> seen;
  std::string s;
  for (const bench::OpVariant& v : bench::registry()) {
    if (std::find(seen.begin(), seen.end(), v.family()) != seen.end()) continue;
    seen.push_back(v.family());
    s += (s.empty() ? "" : ", ") + v.family();
  }
  return s;
}

void register_flags(CLI::App* cmd, KernelsArgs& a) {
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  value(cmd, "--config", a.config, "LIST",
        "presets to run, comma-separated: workshop (D512 L8 H8 K4 F2048 V1000, B8 S128), big "
        "(the same model at B32 S1024), 1b (D2048 L16 H32 K16 F8192 V32000, B8 S1024), all")
      ->group("Shapes");
  value(cmd, "--hidden-dim", a.hidden_dim, "INT",
        "change D in every selected preset (F becomes 4*D unless --ffn-dim is given)")
      ->group("Shapes");
  value(cmd, "--num-heads", a.num_heads, "INT",
        "change H (K becomes H/2, or H when H is odd, unless --num-kv-heads is given)")
      ->group("Shapes");
  value(cmd, "--num-kv-heads", a.num_kv_heads, "INT", "change K; must divide H")->group("Shapes");
  value(cmd, "--ffn-dim", a.ffn_dim, "INT", "change F")->group("Shapes");
  value(cmd, "--vocab-size", a.vocab_size, "INT", "change the vocabulary")->group("Shapes");
  value(cmd, "--batch-size", a.batch_size, "INT", "change B")->group("Shapes");
  value(cmd, "--seq-len", a.seq_len, "INT", "change S")->group("Shapes");

  value(cmd, "--ops", a.ops, "LIST",
        "ops to run, comma-separated (default: all): a family (" + op_families() +
            "), one pass of it (attention.fwd, qkv_gemm.wgrad), gemm (every GEMM), each "
            "optionally with :variant (attention.fwd:flash)")
      ->group("Ops");
  value(cmd, "--precision", a.precision, "LIST",
        "fp32, bf16, fp16 or all, comma-separated; bf16 and fp16 are AMP (fp32 master weights, "
        "gradients and optimizer state)")
      ->group("Ops");
  cmd->add_flag("--no-check", a.no_check, "time only: skip the comparison with the CPU reference")
      ->group("Ops");

  value(cmd, "--repeats", a.repeats, "INT",
        "timed repetitions per op; the table shows their median and min")
      ->group("Timing");
  value(cmd, "--warmup", a.warmup, "INT",
        "untimed calls before them (at least 1: the first tunes the GEMMs)")
      ->group("Timing");
  value(cmd, "--timing", a.timing, "{graph,eager}",
        "graph: the repetitions recorded into one CUDA graph and launched once (no launch gaps, "
        "as the v2 step runs); eager: one launch after another")
      ->group("Timing");

  value(cmd, "--json", a.json_path, "FILE", "also write every figure and check as JSON")
      ->group("Output");
}

std::optional<int> maybe_int(const char* flag, const std::string& text) {
  if (text.empty()) return std::nullopt;
  return parse_int_flag(flag, text);
}

}  // namespace

bench::BenchOptions to_bench_options(const KernelsArgs& a) {
  bench::ShapeOverrides o;
  o.hidden_dim = maybe_int("--hidden-dim", a.hidden_dim);
  o.num_heads = maybe_int("--num-heads", a.num_heads);
  o.num_kv_heads = maybe_int("--num-kv-heads", a.num_kv_heads);
  o.ffn_dim = maybe_int("--ffn-dim", a.ffn_dim);
  o.vocab_size = maybe_int("--vocab-size", a.vocab_size);
  o.batch_size = maybe_int("--batch-size", a.batch_size);
  o.seq_len = maybe_int("--seq-len", a.seq_len);

  bench::BenchOptions b;
  for (const bench::BenchShape& preset : bench::parse_configs(a.config)) {
    b.shapes.push_back(bench::apply_overrides(preset, o));
  }
  b.precisions = bench::parse_precisions(a.precision);
  if (a.ops.empty()) {
    for (const bench::OpVariant& v : bench::registry()) b.ops.push_back(&v);
  } else {
    b.ops = bench::select_ops(a.ops);
  }
  b.timing.repeats = parse_int_flag("--repeats", a.repeats);
  bench::check_repeats(b.timing.repeats);
  b.timing.warmup = parse_int_flag("--warmup", a.warmup);
  bench::check_warmup(b.timing.warmup);
  b.timing.mode = bench::parse_timing_mode(a.timing);
  b.check = !a.no_check;
  require_parent_directory("--json", a.json_path);
  return b;
}

KernelsCommand::KernelsCommand(CLI::App& app)
    : cmd_(app.add_subcommand(
          "kernels",
          "run each CUDA op of one layer alone: check it against the CPU reference, time it and "
          "place it on the roofline")) {
  register_flags(cmd_, args_);
  cmd_->footer(
      "One table per preset and precision: median and min µs of the repetitions (CUDA events, "
      "L2 warm), GB/s and TFLOP/s from the cost model's bytes and FLOPs, % roof = the op's time "
      "at the roofline bound (device_peaks) over its median, and the check: max|gpu - cpu| / "
      "max|cpu| against fp32 1e-4, bf16/fp16 2e-2 (large shapes compare a slice, said below "
      "each table). Variants of an op sit on adjacent rows. Exit code 1 when a check fails or "
      "an op fails. docs/KERNELS.md has the details.");
}

int KernelsCommand::run() const {
  const bench::BenchOptions options = to_bench_options(args_);
#if !defined(TINYLLAMA_HAS_CUDA)
  throw RuntimeFailure(
      "kernels: this build of tinyllama has no CUDA backend (built without the CUDA toolkit); the "
      "kernel bench needs a CUDA build and a GPU");
#endif
  if (!cuda_device_available()) {
    throw RuntimeFailure("kernels: no CUDA device found (" + cuda_build_versions() +
                         "); the kernel bench runs each op on a GPU");
  }
  std::cout << "kernels: " << options.ops.size() << " ops x " << options.shapes.size()
            << " configs x " << options.precisions.size() << " precisions"
            << (options.check ? ", each checked against the CPU reference" : "") << std::endl;
  const bench::BenchReport report = bench::run_bench(
      options, [](Precision p) { return make_cuda_backend(p); },
      [](const bench::BenchReport& r, const bench::RunResult& run) {
        if (r.runs.size() == 1) std::cout << bench::format_preamble(r);
        std::cout << bench::format_run(r, run) << std::flush;
      });
  std::cout << bench::format_summary(report);
  if (!args_.json_path.empty()) {
    bench::write_report_json(args_.json_path, report);
    std::cout << "wrote " << args_.json_path << "\n";
  }
  const std::string failures = bench::failure_line(report);
  if (!failures.empty()) throw RuntimeFailure(failures);
  return 0;
}

}  // namespace tinyllama::cli
