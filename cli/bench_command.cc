#include "bench_command.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "bench_suite/environment.h"
#include "bench_suite/outputs.h"
#include "bench_suite/regression.h"
#include "core/errors.h"
#include "io/json_file.h"
#include "option_value.h"
#include "train/flag_values.h"
#include "train/report.h"

namespace tinyllama::cli {
namespace {

using suite::BenchPoint;
using suite::BenchReport;
using suite::fixed;
using suite::PeerResult;
using suite::PointResult;

BenchReport read_bench_json(const std::string& flag, const std::string& path) {
  const nlohmann::json j = read_json_file(flag, path);
  try {
    return suite::report_from_json(j);
  } catch (const RuntimeFailure& e) {
    throw UsageError(flag + " " + path + ": " + e.what());
  }
}

// "[3/18] v2 bf16 B8 S128: 2.312 ms/step, 3546 tokens/s, peak 123.4 MB, SM
// 1710 MHz" (the clock where the GPU was sampled).
std::string point_line(int done, int total, const PointResult& r) {
  std::string line =
      "[" + std::to_string(done) + "/" + std::to_string(total) + "] " + r.point.key() + ": ";
  if (!r.ok) return line + "FAILED: " + r.error;
  line += fixed(r.ms_per_step, 3) + " ms/step, " + fixed(r.tokens_per_s, 0) + " tokens/s, peak " +
          fixed(r.peak_mb, 1) + " MB";
  if (r.sm_mhz) line += ", SM " + fixed(*r.sm_mhz, 0) + " MHz";
  for (const PeerResult& p : r.peers) {
    line += " | torch " + p.variant + " " + (p.ok ? fixed(p.ms_per_step, 3) + " ms" : "failed");
  }
  return line;
}

// The train --json a point's run left in its directory (null if unreadable).
nlohmann::json read_point_json(const suite::RunSettings& settings, const PointResult& r) {
  return read_json_object(settings.out_dir + "/points/" + suite::slug(r.point.key()) +
                          "/train.json");
}

// "cpu" or "cuda", as a train report says it ran.
std::string device_of(const nlohmann::json& train_json) {
  if (!train_json.is_object() || !train_json.contains("config")) return "cpu";
  return train_json.at("config").value("device", "cpu");
}

struct PeerPlan {
  bool enabled = false;
  std::string why_not;  // for --peer auto without torch
  std::vector<std::string> variants;
};

std::vector<std::string> parse_peer_variants(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string v; std::getline(in, v, ',');) {
    if (v != "eager" && v != "compile") {
      throw UsageError("--peer-variants " + text + ": unknown variant '" + v +
                       "'; allowed: eager, compile");
    }
    out.push_back(v);
  }
  if (out.empty()) throw UsageError("--peer-variants: expected at least one variant");
  return out;
}

PeerPlan plan_peer(const BenchArgs& a, const suite::RunSettings& settings) {
  const std::vector<std::string> variants = parse_peer_variants(a.peer_variants);
  if (a.peer == "off") return {};
  if (a.peer != "on" && a.peer != "auto") {
    throw UsageError("--peer " + a.peer + ": allowed values are auto, on, off");
  }
  if (!std::ifstream(settings.peer_script)) {
    if (a.peer == "on") throw UsageError("--peer-script " + settings.peer_script + ": not found");
    return {false, "peer script " + settings.peer_script + " not found", {}};
  }
  if (!suite::torch_importable(settings.peer_python)) {
    if (a.peer == "on") {
      throw UsageError("--peer on: " + settings.peer_python + " cannot import torch");
    }
    return {false, settings.peer_python + " cannot import torch", {}};
  }
  return {true, "", variants};
}

void register_flags(CLI::App* cmd, BenchArgs& a) {
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  value(cmd, "--levels", a.levels, "LIST",
        "comma-separated levels, or all (every level this binary implements)")
      ->group("Matrix");
  value(cmd, "--precisions", a.precisions, "LIST",
        "comma-separated: fp32, bf16, fp16 (bf16/fp16: train --use-amp; CUDA only)")
      ->group("Matrix");
  value(cmd, "--batch-sizes", a.batch_sizes, "LIST", "comma-separated batch sizes B")
      ->group("Matrix");
  value(cmd, "--seq-lens", a.seq_lens, "LIST", "comma-separated sequence lengths S")
      ->group("Matrix");
  cmd->add_flag("--ablation", a.ablation,
                "after each point, run it again with each plan choice of its level switched "
                "alone (fusions, attention, graphs, optimizer, norm, loss) and report each "
                "choice's effect in ms and %")
      ->group("Matrix");
  register_suite_flags(cmd, a.suite, "bench-out");
  value(cmd, "--peer", a.peer, "{auto,on,off}",
        "the PyTorch peer beside each precision and shape (eager, and torch.compile with CUDA "
        "graphs on a GPU): auto runs it when python3 can import torch")
      ->group("Peer");
  value(cmd, "--peer-script", a.peer_script, "PATH", "the peer script")
      ->default_str("scripts/peer/torch_peer.py of the source tree")
      ->group("Peer");
  value(cmd, "--peer-python", a.peer_python, "PATH", "the Python that runs the peer")
      ->group("Peer");
  value(cmd, "--peer-variants", a.peer_variants, "LIST",
        "peer variants, comma-separated: eager, compile (torch.compile mode reduce-overhead: "
        "CUDA graphs; skipped on the CPU)")
      ->group("Peer");
  value(cmd, "--baseline", a.baseline, "FILE",
        "an earlier bench.json: each point matched by model and key; exit 1 naming each point "
        "slower than --max-slowdown / --min-speedup allow")
      ->group("Regression check");
  value(cmd, "--max-slowdown", a.max_slowdown, "FRACTION",
        "with --baseline: a point more than this much slower fails (0.05: 5 %)")
      ->group("Regression check");
  value(cmd, "--min-speedup", a.min_speedup, "RATIO",
        "with --baseline: a point whose baseline ms / ms falls below this fails")
      ->group("Regression check");
  cmd->add_flag("--strict", a.strict,
                "with --baseline: points found on one side only fail too (else listed only)")
      ->group("Regression check");
  cmd->add_flag("--resume", a.resume,
                "take the points an earlier bench into the same --out finished (its bench.json: "
                "same model and step counts) and run only the others")
      ->group("Output");
  value(cmd, "--from-json", a.from_json, "FILE",
        "run nothing: rewrite the reports and plots of an earlier bench.json into --out (and "
        "check it against --baseline)")
      ->group("Output");
}

// --resume: the points of an earlier, interrupted bench into the same --out
// with the same model and step counts (null when there is none to take).
std::optional<BenchReport> earlier_bench(const BenchArgs& a, const suite::RunSettings& settings) {
  const std::string path = settings.out_dir + "/bench.json";
  if (!a.resume || !std::ifstream(path)) return std::nullopt;
  BenchReport earlier = read_bench_json("--resume", path);
  if (earlier.model != settings.model.describe() || earlier.num_steps != settings.num_steps ||
      earlier.warmup_steps != settings.warmup_steps) {
    throw UsageError("--resume: " + path + " was made with another model or step counts (" +
                     earlier.model + ", " + std::to_string(earlier.warmup_steps) + " + " +
                     std::to_string(earlier.num_steps) + " steps); use another --out");
  }
  return earlier;
}

const PointResult* find_point(const std::optional<BenchReport>& report, const std::string& key) {
  if (!report) return nullptr;
  for (const PointResult& r : report->points) {
    if (r.ok && r.match_key() == key) return &r;
  }
  return nullptr;
}

// Every point of the matrix (taken from an earlier run with --resume), the
// peer beside each precision and shape, the outputs rewritten after each.
BenchReport run_matrix(const BenchArgs& a, const suite::RunSettings& settings) {
  const suite::BenchAxes axes{suite::parse_level_list(a.levels),
                              suite::parse_precision_list(a.precisions),
                              suite::parse_int_list("--batch-sizes", a.batch_sizes),
                              suite::parse_int_list("--seq-lens", a.seq_lens)};
  std::vector<BenchPoint> points = suite::expand(axes);
  if (a.ablation) points = suite::with_ablation(points);
  const PeerPlan peer = plan_peer(a, settings);
  if (!peer.why_not.empty()) std::cout << "peer: off (" << peer.why_not << ")\n";
  const std::optional<BenchReport> earlier = earlier_bench(a, settings);

  BenchReport report;
  report.model = settings.model.describe();
  report.num_steps = settings.num_steps;
  report.warmup_steps = settings.warmup_steps;
  report.device = settings.device.empty() ? "default" : settings.device;
  std::cout << "bench | model " << report.model << " | " << points.size() << " points"
            << (peer.enabled ? " + the PyTorch peer per precision and shape" : "") << " | "
            << settings.warmup_steps << " warm-up + " << settings.num_steps
            << " timed steps each | out " << settings.out_dir << std::endl;

  nlohmann::json first_train, first_peer;
  // The peer depends on precision and shape only: run once, shown on every level's row.
  std::map<std::string, std::vector<PeerResult>> peers_by_shape;
  const auto start = std::chrono::steady_clock::now();
  int ran = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    PointResult r;
    r.point = points[i];
    r.model = report.model;
    const PointResult* taken = find_point(earlier, r.match_key());
    if (taken) {
      r = *taken;
    } else {
      r = suite::run_point(settings, points[i]);
      ++ran;
    }
    const nlohmann::json train_json = r.ok ? read_point_json(settings, r) : nlohmann::json();
    if (first_train.is_null() && train_json.is_object()) {
      first_train = train_json;
      report.device = device_of(train_json);
    }
    if (peer.enabled && r.ok && points[i].variant.name.empty()) {
      const std::string shape = r.point.precision + " B" + std::to_string(r.point.batch) + " S" +
                                std::to_string(r.point.seq);
      auto [it, fresh] = peers_by_shape.try_emplace(shape);
      if (fresh && taken && !taken->peers.empty()) {
        it->second = taken->peers;
      } else if (fresh) {
        const std::string device = device_of(train_json);
        // On the CPU only eager: torch.compile's CUDA graphs need a GPU.
        for (const std::string& variant : peer.variants) {
          if (device == "cpu" && variant == "compile") continue;
          nlohmann::json peer_json;
          it->second.push_back(suite::run_peer(settings, r.point, variant, device, &peer_json));
          if (first_peer.is_null() && it->second.back().ok) first_peer = peer_json;
        }
      }
      r.peers = it->second;
    }
    report.points.push_back(r);
    report.environment = suite::collect_environment(first_train, first_peer);
    if (earlier && first_peer.is_null() && earlier->environment.count("torch")) {
      report.environment["torch"] = earlier->environment.at("torch");
    }
    suite::write_bench_outputs(report, settings.out_dir);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double eta = ran > 0 ? elapsed / ran * static_cast<double>(points.size() - i - 1) : 0;
    std::cout << point_line(static_cast<int>(i + 1), static_cast<int>(points.size()), r)
              << (taken ? " (from the earlier run)" : "") << " | elapsed "
              << format_duration(elapsed) << ", ETA " << format_duration(eta) << std::endl;
  }
  return report;
}

}  // namespace

BenchCommand::BenchCommand(CLI::App& app)
    : cmd_(app.add_subcommand("bench",
                              "train every point of a matrix of levels, precisions, batch sizes "
                              "and sequence lengths and report their speed and memory")) {
  register_flags(cmd_, args_);
  cmd_->footer(
      "Each point is one `tinyllama train` in a child process (its failure, out of memory "
      "included, is recorded and the bench goes on). Writes bench.json (every figure and the "
      "environment), bench.csv, bench.md and SVG plots into --out. Exit codes: 0 done, 1 a point "
      "failed or the regression check failed, 2 bad usage.");
}

int BenchCommand::run() const {
  const BenchArgs& a = args_;
  suite::RunSettings settings = to_run_settings(a.suite);
  if (!a.peer_script.empty()) settings.peer_script = a.peer_script;
  settings.peer_python = a.peer_python;
  suite::RegressionRule rule;
  if (!a.max_slowdown.empty())
    rule.max_slowdown = parse_real_flag("--max-slowdown", a.max_slowdown);
  if (!a.min_speedup.empty()) rule.min_speedup = parse_real_flag("--min-speedup", a.min_speedup);
  rule.strict = a.strict;
  if (a.baseline.empty() && (rule.max_slowdown || rule.min_speedup || a.strict)) {
    throw UsageError(std::string(rule.max_slowdown  ? "--max-slowdown"
                                 : rule.min_speedup ? "--min-speedup"
                                                    : "--strict") +
                     ": needs --baseline");
  }
  std::optional<BenchReport> baseline;
  if (!a.baseline.empty()) {
    suite::check_rule(rule);
    baseline = read_bench_json("--baseline", a.baseline);
  }

  const BenchReport report =
      a.from_json.empty() ? run_matrix(a, settings) : read_bench_json("--from-json", a.from_json);

  const std::vector<std::string> written = suite::write_bench_outputs(report, settings.out_dir);
  std::cout << "wrote " << written.size() << " files into " << settings.out_dir
            << " (bench.json, bench.csv, bench.md, plots)\n";
  int failed_points = 0;
  for (const PointResult& r : report.points) failed_points += r.ok ? 0 : 1;
  bool regressed = false;
  if (baseline) {
    const suite::RegressionResult check = suite::compare_to_baseline(*baseline, report, rule);
    std::cout << check.describe(rule);
    regressed = check.failed;
  }
  std::cout.flush();
  if (regressed) throw RuntimeFailure("regression check failed against " + a.baseline);
  if (failed_points > 0) {
    throw RuntimeFailure(std::to_string(failed_points) + " of " +
                         std::to_string(report.points.size()) +
                         " points failed (their error lines are in bench.md)");
  }
  return 0;
}

}  // namespace tinyllama::cli
