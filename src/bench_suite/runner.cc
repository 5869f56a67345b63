#include "bench_suite/runner.h"

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench_suite/child_run.h"
#include "core/errors.h"
#include "io/json_file.h"

namespace tinyllama::suite {
namespace {

namespace fs = std::filesystem;

std::string failure_line(const ChildResult& child) {
  if (!child.error_line.empty()) return child.error_line;
  return "exited with code " + std::to_string(child.exit_code);
}

}  // namespace

std::string slug(const std::string& key) {
  std::string out;
  for (char c : key) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (plain || c == '.' || c == '-') {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

std::vector<std::string> train_command(const RunSettings& settings, const BenchPoint& point,
                                       const std::string& json_path,
                                       const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {"train"};
  if (!settings.device.empty()) args.insert(args.end(), {"--device", settings.device});
  const std::vector<std::string> model = settings.model.train_args();
  args.insert(args.end(), model.begin(), model.end());
  const std::vector<std::string> own = point.train_args();
  args.insert(args.end(), own.begin(), own.end());
  args.insert(args.end(), {"--num-steps", std::to_string(settings.num_steps), "--warmup-steps",
                           std::to_string(settings.warmup_steps), "--json", json_path});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return args;
}

PointResult run_point(const RunSettings& settings, const BenchPoint& point,
                      const std::vector<std::string>& extra_args, const std::string& tag) {
  PointResult result;
  result.point = point;
  result.model = settings.model.describe();
  const fs::path dir = fs::path(settings.out_dir) / "points" / (slug(point.key()) + tag);
  fs::create_directories(dir);
  const fs::path json = dir / "train.json";
  fs::remove(json);
  const ChildResult child =
      run_child(settings.executable, train_command(settings, point, json.string(), extra_args),
                (dir / "train.log").string(), (dir / "train.err").string(), settings.timeout_s);
  if (child.exit_code != 0) {
    result.error = failure_line(child);
    return result;
  }
  const nlohmann::json report = read_json_object(json.string());
  if (report.is_null()) {
    result.error = "train exited 0 but wrote no readable " + json.string();
    return result;
  }
  try {
    read_train_json(report, result);
  } catch (const RuntimeFailure& e) {
    result.error = e.what();
  }
  return result;
}

PeerResult run_peer(const RunSettings& settings, const BenchPoint& point,
                    const std::string& variant, const std::string& device,
                    nlohmann::json* peer_report) {
  PeerResult result;
  result.variant = variant;
  const std::string tag = point.precision + "_B" + std::to_string(point.batch) + "_S" +
                          std::to_string(point.seq) + "_" + variant;
  const fs::path dir = fs::path(settings.out_dir) / "peer" / tag;
  fs::create_directories(dir);
  const fs::path json = dir / "peer.json";
  fs::remove(json);
  const ModelFlags& m = settings.model;
  const std::vector<std::string> args = {settings.peer_script,
                                         "--vocab-size",
                                         std::to_string(m.vocab_size),
                                         "--hidden-dim",
                                         std::to_string(m.hidden_dim),
                                         "--num-layers",
                                         std::to_string(m.num_layers),
                                         "--num-heads",
                                         std::to_string(m.num_heads),
                                         "--num-kv-heads",
                                         std::to_string(m.kv_heads()),
                                         "--ffn-dim",
                                         std::to_string(m.ffn()),
                                         "--batch-size",
                                         std::to_string(point.batch),
                                         "--seq-len",
                                         std::to_string(point.seq),
                                         "--num-steps",
                                         std::to_string(settings.num_steps),
                                         "--warmup-steps",
                                         std::to_string(settings.warmup_steps),
                                         "--precision",
                                         point.precision,
                                         "--variant",
                                         variant,
                                         "--device",
                                         device,
                                         "--json",
                                         json.string()};
  const ChildResult child = run_child(settings.peer_python, args, (dir / "peer.log").string(),
                                      (dir / "peer.err").string(), settings.timeout_s);
  if (child.exit_code != 0) {
    result.error = failure_line(child);
    return result;
  }
  const nlohmann::json report = read_json_object(json.string());
  try {
    if (report.is_null()) throw RuntimeFailure("no peer.json written");
    result = read_peer_json(report);
    if (peer_report) *peer_report = report;
  } catch (const RuntimeFailure& e) {
    result.error = e.what();
  }
  return result;
}

bool torch_importable(const std::string& python) {
  const fs::path dir = fs::temp_directory_path();
  const fs::path log = dir / ("tinyllama_torch_probe_" + std::to_string(::getpid()));
  bool ok = false;
  try {
    ok = run_child(python, {"-c", "import torch"}, log.string(), log.string(), 120).exit_code == 0;
  } catch (const RuntimeFailure&) {
    ok = false;
  }
  fs::remove(log);
  return ok;
}

}  // namespace tinyllama::suite
