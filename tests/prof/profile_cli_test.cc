// `tinyllama train --profile` end to end on the CPU: the files it writes,
// their documented keys, the plain note that kernel statistics need a GPU,
// and one-line usage errors for bad profile flags.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli/run_binary.h"

namespace tinyllama::testing {
namespace {

const std::string kTiny =
    "train --device cpu --vocab-size 40 --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 9 "
    "--batch-size 3 --num-steps 5 --warmup-steps 1 --log-every 5 ";

TEST(ProfileCli, CpuRunWritesTraceAndSummaryAndSaysKernelsNeedAGpu) {
  const auto dir = scratch_dir("profile");
  const auto out = dir / "nested" / "prof";  // created, parents included
  const RunResult r = run_tinyllama(
      kTiny + "--version v1 --profile --profile-steps 2 --profile-dir " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("profile: 2 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernel statistics need a GPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote " + (out / "trace.json").string()), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out / "kernel_stats.csv"));

  const nlohmann::json s = nlohmann::json::parse(read_text(out / "summary.json"));
  for (const char* key :
       {"profiled_steps", "device", "backend", "level", "precision", "config", "kernel_statistics",
        "notes", "step_time", "gpu", "flops", "mfu", "device_peak", "op_time_source", "ops",
        "op_instances", "phases", "memory"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s["profiled_steps"], 2);
  EXPECT_EQ(s["kernel_statistics"], false);
  EXPECT_TRUE(s["gpu"].is_null());
  EXPECT_EQ(s["op_time_source"], "host_ranges");
  EXPECT_NE(s["notes"].dump().find("kernel statistics need a GPU"), std::string::npos);
  // 3 timed steps after the 2 profiled ones are the overhead baseline.
  EXPECT_TRUE(s["step_time"]["unprofiled_ms_per_step"].is_number());
  EXPECT_EQ(
      s["flops"]["model_flops_per_step"].get<std::int64_t>(),
      s["flops"]["six_n_t"].get<std::int64_t>() + s["flops"]["attention_term"].get<std::int64_t>());
  for (const char* key : {"parameters_bytes", "gradients_bytes", "optimizer_bytes",
                          "activations_bytes", "workspace_bytes", "total_bytes"}) {
    EXPECT_GT(s["memory"][key].get<std::int64_t>(), key == std::string("workspace_bytes") ? -1 : 0)
        << key;
  }
  // Every modelled op was timed on the host.
  for (const nlohmann::json& op : s["op_instances"]) {
    if (op["flops_per_step"].is_number()) {
      EXPECT_GT(op["host_ms_per_step"].get<double>(), 0.0) << op["op"];
    }
  }

  const nlohmann::json t = nlohmann::json::parse(read_text(out / "trace.json"));
  std::set<std::string> names;
  int steps = 0;
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    names.insert(e["name"].get<std::string>());
    if (e["name"] == "step") ++steps;
  }
  EXPECT_EQ(steps, 2);
  for (const char* name : {"forward", "backward", "optimizer", "layer0", "layer1", "qkv_gemm",
                           "attention", "qkv_gemm_wgrad", "adamw"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  std::filesystem::remove_all(dir);
}

TEST(ProfileCli, BadProfileFlagsAreOneLineUsageErrors) {
  RunResult r = run_tinyllama(kTiny + "--profile --profile-steps 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--profile-steps 0: must be at least 1"), std::string::npos) << r.err;

  r = run_tinyllama(kTiny + "--profile --profile-steps many");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--profile-steps many"), std::string::npos) << r.err;

  r = run_tinyllama(kTiny + "--profile-steps 3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--profile-steps: needs --profile"), std::string::npos) << r.err;

  r = run_tinyllama(kTiny + "--profile-api-calls");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--profile-api-calls: needs --profile"), std::string::npos) << r.err;

  const auto dir = scratch_dir("profile_file");
  const auto file = dir / "a_file";
  std::ofstream(file) << "x";
  r = run_tinyllama(kTiny + "--profile --profile-dir " + file.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("exists and is not a directory"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
