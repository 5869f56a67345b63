#pragma once
// Runs one bench point: `train` of this binary as a child process with the
// point's flags and --json into the point's directory, read back into a
// PointResult; and the PyTorch peer at the same shape. A failure is a
// result with its error line, never an exception, so the bench goes on.
#include <string>
#include <vector>

#include "bench_suite/matrix.h"
#include "bench_suite/results.h"

namespace tinyllama::suite {

struct RunSettings {
  std::string executable = "/proc/self/exe";
  ModelFlags model;
  int num_steps = 50;
  int warmup_steps = 5;
  std::string device;   // "" : train's own default (cuda when present)
  std::string out_dir;  // each point writes under out_dir/points/<slug>/
  double timeout_s = 900;
  std::string peer_python = "python3";
  std::string peer_script;  // scripts/peer/torch_peer.py
};

// "v2 bf16 B8 S128 [qkv_fusion off]" -> "v2_bf16_B8_S128_qkv_fusion_off".
std::string slug(const std::string& key);

// The train command line of a point (without the executable).
std::vector<std::string> train_command(const RunSettings& settings, const BenchPoint& point,
                                       const std::string& json_path,
                                       const std::vector<std::string>& extra_args);

// extra_args: more train flags (compare's --profile ...). tag: a suffix of
// the point's directory, so a second run of a point keeps its own files.
// The run's train --json is kept in that directory as train.json.
PointResult run_point(const RunSettings& settings, const BenchPoint& point,
                      const std::vector<std::string>& extra_args = {}, const std::string& tag = "");

// The peer variant ("eager", "compile") at the point's precision and shape
// on `device` (what the point's train run used).
PeerResult run_peer(const RunSettings& settings, const BenchPoint& point,
                    const std::string& variant, const std::string& device,
                    nlohmann::json* peer_report = nullptr);

// Whether `python` can import torch (bench --peer auto).
bool torch_importable(const std::string& python);

}  // namespace tinyllama::suite
