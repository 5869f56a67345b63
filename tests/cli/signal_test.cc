// Real signals sent to a running `tinyllama train`: the first SIGINT or
// SIGTERM finishes the step in flight and keeps the work (checkpoint,
// summary, --json) before exiting 130 / 143; a resume from that checkpoint
// ends bit-identical to an uninterrupted run; a second signal exits at once.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_binary.h"
#include "spawn.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

const std::string kModel =
    "train --device cpu --vocab-size 64 --hidden-dim 32 --num-layers 2 --num-heads 4 "
    "--seq-len 8 --batch-size 3 --warmup-steps 1 --learning-rate 3e-3 --log-every 1 ";

// The timed step the interrupted run reached, from its "interrupted by" line.
int steps_done(const std::string& out) {
  std::smatch m;
  const std::regex line("after step ([0-9]+) \\(warm-up included\\)");
  return std::regex_search(out, m, line) ? std::stoi(m[1].str()) : -1;
}

void interrupt_and_resume(int sig, const std::string& tag) {
  const auto dir = scratch_dir(tag);
  const std::string ck = (dir / "ck").string();
  const std::string report = (dir / "r.json").string();
  int done = 0;
  {
    Spawned run(split(kModel + "--num-steps 1000000 --checkpoint-dir " + ck + " --json " + report),
                dir);
    ASSERT_TRUE(run.wait_for_output("step 5/")) << run.out() << run.err();
    run.signal(sig);
    EXPECT_EQ(run.wait(), 128 + sig) << run.err();
    EXPECT_FALSE(run.exited_by_signal()) << "the run must exit by itself";
    const std::string out = run.out();
    EXPECT_NE(out.find("summary over "), std::string::npos) << out;
    done = steps_done(out);
    ASSERT_GE(done, 6) << out;
    ASSERT_EQ(nlohmann::json::parse(read_text(report))["losses"].size(),
              static_cast<std::size_t>(done - 1))
        << "every timed step done is in the report";
  }
  char name[40];
  std::snprintf(name, sizeof name, "ckpt-%08d.safetensors", done);
  ASSERT_TRUE(fs::exists(dir / "ck" / name)) << name;
  for (const auto& e : fs::directory_iterator(dir / "ck")) {
    EXPECT_EQ(e.path().extension(), ".safetensors") << "no temporary left: " << e.path();
  }

  // Resumed for 3 more timed steps against the same run never stopped.
  const std::string steps = "--num-steps " + std::to_string(done - 1 + 3) + " ";
  RunResult r = run_tinyllama(kModel + steps + "--resume " + ck + " --save-weights " +
                              (dir / "b.st").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_tinyllama(kModel + steps + "--save-weights " + (dir / "a.st").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(dir / "a.st"), read_text(dir / "b.st")) << "resume is not bit-identical";
  fs::remove_all(dir);
}

TEST(Signals, SigintKeepsTheWorkExits130AndResumesBitIdentically) {
  interrupt_and_resume(SIGINT, "sigint");
}

TEST(Signals, SigtermKeepsTheWorkExits143AndResumesBitIdentically) {
  interrupt_and_resume(SIGTERM, "sigterm");
}

TEST(Signals, ASecondSignalExitsAtOnce) {
  const auto dir = scratch_dir("second_signal");
  // Steps of over a second on 2 cores (the CPU backend's BLAS GEMMs made
  // the 128-wide model's 10 ms): the second signal lands while the first
  // waits for the step to finish.
  Spawned run(split("train --device cpu --vocab-size 64 --hidden-dim 512 --num-layers 4 "
                    "--num-heads 4 --seq-len 256 --batch-size 8 --warmup-steps 0 --log-every 1 "
                    "--num-steps 1000 --json " +
                    (dir / "r.json").string()),
              dir);
  ASSERT_TRUE(run.wait_for_output("step 1/")) << run.err();
  run.signal(SIGINT);
  // Apart, so the two are not merged into one pending signal.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  run.signal(SIGINT);
  EXPECT_EQ(run.wait(), 130);
  EXPECT_EQ(run.out().find("summary over"), std::string::npos) << run.out();
  EXPECT_FALSE(fs::exists(dir / "r.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
