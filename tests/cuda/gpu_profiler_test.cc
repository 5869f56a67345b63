// --profile on the GPU: CUPTI's records of a tiny CUDA run come back with
// kernel names and durations, eager kernels are attributed to the ops that
// launched them, and kernels replayed from a CUDA graph to the ops that
// captured them; an unprofiled run samples the clock too. Skips without a GPU.
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gpu_test_util.h"
#include "train/report.h"
#include "train/run_setup.h"
#include "train/trainer.h"

namespace tinyllama::gpu_test {
namespace {

TrainOptions tiny_profiled_run(const std::string& level, const std::filesystem::path& dir) {
  TrainOptions o;
  o.model.vocab_size = 97;
  o.model.hidden_dim = 128;
  o.model.num_layers = 2;
  o.model.num_heads = 4;
  o.model.num_kv_heads = 2;
  o.model.ffn_dim = 256;
  o.shape = BatchShape{2, 32};
  o.request.level = level;
  o.request.ops = level_preset(level);
  o.device_request = DeviceKind::Cuda;
  o.num_steps = 4;
  o.warmup_steps = 3;  // a v2 run captures its graph in the warm-up
  o.profile = true;
  o.profile_steps = 2;
  o.profile_dir = dir.string();
  resolve_run(o);
  return o;
}

std::filesystem::path fresh_dir(const std::string& tag) {
  auto d = std::filesystem::temp_directory_path() /
           ("tinyllama_gpu_profile_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

const nlohmann::json* find_op(const nlohmann::json& summary, const std::string& name) {
  for (const nlohmann::json& o : summary["ops"]) {
    if (o["op"] == name) return &o;
  }
  return nullptr;
}

class GpuProfiler : public GpuTest {};

TEST_F(GpuProfiler, EagerRunYieldsNamedTimedKernelsAttributedToOps) {
  const auto dir = fresh_dir("v1");
  const TrainSummary s = train(tiny_profiled_run("v1", dir), nullptr);
  EXPECT_NE(s.profile_report.find("kernel dispatches/step"), std::string::npos) << s.profile_report;

  std::ifstream csv(dir / "kernel_stats.csv");
  ASSERT_TRUE(csv.good());
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs");
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    // "name",calls,total,...: the name is quoted and not empty.
    ASSERT_GE(line.size(), 3u);
    EXPECT_EQ(line[0], '"');
    const auto close = line.rfind("\",");
    ASSERT_NE(close, std::string::npos) << line;
    EXPECT_GT(close, 1u) << "empty kernel name: " << line;
    std::stringstream fields(line.substr(close + 2));
    long long calls = 0, total = 0;
    char comma = 0;
    fields >> calls >> comma >> total;
    EXPECT_GT(calls, 0) << line;
    EXPECT_GT(total, 0) << "non-positive duration: " << line;
  }
  EXPECT_GT(rows, 3);

  const nlohmann::json j = read_json(dir / "summary.json");
  EXPECT_EQ(j["kernel_statistics"], true) << j["notes"].dump();
  EXPECT_GT(j["gpu"]["kernel_dispatches_per_step"].get<double>(), 10.0);
  // Every kernel of every profiled step, and no other: the count the
  // runner took on a capture of the same step.
  ASSERT_TRUE(s.launches.has_value()) << s.execution_note;
  EXPECT_EQ(j["gpu"]["kernel_dispatches_per_step"].get<double>(), s.launches->kernels);
  EXPECT_GT(j["gpu"]["gpu_time_per_step_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["op_time_source"], "gpu_kernels");
  // Every GEMM op launched at least one kernel inside its range.
  for (const char* op : {"forward/qkv_gemm", "backward/qkv_gemm_wgrad", "forward/lm_head_gemm",
                         "optimizer/adamw", "forward/attention", "backward/attention"}) {
    const nlohmann::json* o = find_op(j, op);
    ASSERT_NE(o, nullptr) << op;
    EXPECT_GE((*o)["kernels_per_step"].get<double>(), 1.0) << op;
    EXPECT_GT((*o)["achieved_gbps"].get<double>(), 0.0) << op;
  }
  EXPECT_EQ(find_op(j, "(unattributed)"), nullptr) << "kernels without a launch record";
  // The SM clock and power while the timed steps ran, or why not (no NVML).
  ASSERT_TRUE(j.contains("clocks")) << j.dump();
  const nlohmann::json& clocks = j["clocks"];
  if (clocks.contains("samples")) {
    EXPECT_GT(clocks["sm_mhz_min"].get<double>(), 0.0) << clocks.dump();
    EXPECT_GT(clocks["power_w_median"].get<double>(), 0.0) << clocks.dump();
    if (clocks["device_max_sm_mhz"].is_number()) {
      EXPECT_LE(clocks["sm_mhz_max"].get<double>(), clocks["device_max_sm_mhz"].get<double>());
    }
    EXPECT_NE(s.profile_report.find("  clocks    SM "), std::string::npos) << s.profile_report;
  } else {
    EXPECT_NE(s.profile_report.find("  clocks    not sampled: "), std::string::npos)
        << s.profile_report;
  }
  // Without --profile-api-calls the profiled steps had no API records: every
  // kernel and copy was placed by the launch order learnt in the warm-up.
  const double per_step = j["gpu"]["kernel_dispatches_per_step"].get<double>() +
                          j["gpu"]["memcpy_per_step"].get<double>() +
                          j["gpu"]["memset_per_step"].get<double>();
  EXPECT_EQ(j["gpu"]["records_by_launch_order_per_step"].get<double>(), per_step)
      << j["notes"].dump();
  std::filesystem::remove_all(dir);
}

// --profile-api-calls: the same counts and ops, from API records, and the
// trace's CUDA API track holds the launches. Also runs after another
// profiler has detached CUPTI from this process, so attaching again works.
TEST_F(GpuProfiler, EagerRunWithApiCallsMatchesTheLearntOrder) {
  const auto dir = fresh_dir("v1_api");
  TrainOptions o = tiny_profiled_run("v1", dir);
  o.profile_api_calls = true;
  const TrainSummary s = train(o, nullptr);
  const nlohmann::json j = read_json(dir / "summary.json");
  EXPECT_EQ(j["kernel_statistics"], true) << j["notes"].dump();
  ASSERT_TRUE(s.launches.has_value()) << s.execution_note;
  EXPECT_EQ(j["gpu"]["kernel_dispatches_per_step"].get<double>(), s.launches->kernels);
  EXPECT_EQ(j["gpu"]["records_by_launch_order_per_step"].get<double>(), 0.0);
  EXPECT_EQ(find_op(j, "(unattributed)"), nullptr);
  const nlohmann::json trace = read_json(dir / "trace.json");
  int launches = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "cuda_api" &&
        e["name"].get<std::string>().find("aunch") != std::string::npos) {
      ++launches;
    }
  }
  EXPECT_GE(launches, s.launches->kernels);
  std::filesystem::remove_all(dir);
}

TEST_F(GpuProfiler, GraphReplayedKernelsFindTheirOpsByCaptureTag) {
  const auto dir = fresh_dir("v2");
  const TrainSummary s = train(tiny_profiled_run("v2", dir), nullptr);
  const nlohmann::json j = read_json(dir / "summary.json");
  if (s.execution != "cuda_graph")
    GTEST_SKIP() << "the run did not replay a graph: " << s.execution_note;
  EXPECT_GT(j["gpu"]["graph_kernels_per_step"].get<double>(), 10.0) << j["notes"].dump();
  // The steps are launched ahead, so most of a step's kernels run after its
  // host range has closed: each still counts for the step that launched it.
  ASSERT_TRUE(s.launches.has_value());
  EXPECT_EQ(j["gpu"]["graph_kernels_per_step"].get<double>(), s.launches->kernels);
  EXPECT_EQ(j["gpu"]["kernel_dispatches_per_step"].get<double>(), s.launches->kernels);
  EXPECT_EQ(j["gpu"]["launch_calls_per_step"].get<double>(), 1.0);
  const nlohmann::json* qkv = find_op(j, "forward/qkv_gemm");
  ASSERT_NE(qkv, nullptr);
  EXPECT_GE((*qkv)["kernels_per_step"].get<double>(), 1.0) << j["notes"].dump();
  std::filesystem::remove_all(dir);
}

// Without --profile, a CUDA run still samples the clock over its timed
// steps for its summary and --json (or says why it could not).
TEST_F(GpuProfiler, UnprofiledRunReportsTheClockOfItsTimedSteps) {
  TrainOptions o = tiny_profiled_run("v2", fresh_dir("unprofiled"));
  o.profile = false;
  o.num_steps = 200;  // long enough for several 10 ms samples
  const TrainSummary s = train(o, nullptr);
  ASSERT_TRUE(s.clocks.has_value());
  const nlohmann::json j = json_report(s, o)["clocks"];
  if (j.contains("samples")) {
    EXPECT_GT(j["samples"].get<int>(), 0) << j.dump();
    EXPECT_GT(j["sm_mhz_min"].get<double>(), 0.0) << j.dump();
    EXPECT_NE(format_summary(s, o).find("  clocks       SM "), std::string::npos);
  } else {
    EXPECT_FALSE(j["note"].get<std::string>().empty()) << j.dump();
    EXPECT_NE(format_summary(s, o).find("  clocks       not sampled: "), std::string::npos);
  }
}

}  // namespace
}  // namespace tinyllama::gpu_test
