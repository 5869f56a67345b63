// `train --enable-memory-profiling` as a user runs it: the files it writes
// and what is in them, and an unwritable path refused before training. The
// SVG is parsed as XML by scripts/check_memory_profile.py (CTest
// memory_profile_cpu).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kModel =
    "--device cpu --vocab-size 40 --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 8 ";

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(MemoryProfiling, WritesTheTimelineAndThePlotBesideIt) {
  const auto dir = scratch_dir("memory_profile");
  const std::string json_path = (dir / "timeline.json").string();
  const RunResult r = run_tinyllama("train " + kModel +
                                    "--batch-size 2 --num-steps 2 --warmup-steps 1 "
                                    "--enable-memory-profiling " +
                                    json_path + " --json " + (dir / "run.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "memory timeline | ")) << r.out;
  ASSERT_TRUE(fs::exists(dir / "timeline.svg"));
  const nlohmann::json t = nlohmann::json::parse(read_text(json_path));
  const nlohmann::json run = nlohmann::json::parse(read_text(dir / "run.json"));
  // The allocation the timeline reports is the one the run reports.
  EXPECT_EQ(t["allocated"]["total_bytes"], run["memory"]["total_bytes"]);
  EXPECT_EQ(t["allocated"]["arena_bytes"].get<std::int64_t>() +
                t["allocated"]["token_bytes"].get<std::int64_t>(),
            run["memory"]["activations_bytes"].get<std::int64_t>());
  EXPECT_TRUE(t["driver_samples"].is_null());  // none on the cpu, and said so
  EXPECT_TRUE(contains(t["driver_note"].get<std::string>(), "cpu"));
  // The peak op is the op with the most live bytes.
  std::int64_t most = 0;
  for (const nlohmann::json& op : t["ops"])
    most = std::max(most, op["live_bytes"].get<std::int64_t>());
  EXPECT_EQ(t["peak"]["live_bytes"].get<std::int64_t>(), most);
  EXPECT_LE(most, t["arena_bytes"].get<std::int64_t>() +
                      t["allocated"]["token_bytes"].get<std::int64_t>());
  // The run's --json carries the same buffers' lifetimes.
  EXPECT_EQ(run["activations"]["buffers"].size(), t["buffers"].size());
  fs::remove_all(dir);
}

TEST(MemoryProfiling, AnUnwritablePathIsRefusedBeforeTraining) {
  const RunResult r = run_tinyllama("train " + kModel +
                                    "--batch-size 2 --num-steps 2 --enable-memory-profiling "
                                    "/nonexistent/t.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--enable-memory-profiling /nonexistent/t.json")) << r.err;
  EXPECT_FALSE(contains(r.out, "step 1/")) << r.out;
}

TEST(MemoryProfiling, APlotOverTheJsonReportIsRefused) {
  const auto dir = scratch_dir("memory_profile_clash");
  const std::string report = (dir / "t.svg").string();
  const RunResult r =
      run_tinyllama("train " + kModel + "--batch-size 2 --num-steps 2 --enable-memory-profiling " +
                    (dir / "t.json").string() + " --json " + report);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "the same file as --json")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(report));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
