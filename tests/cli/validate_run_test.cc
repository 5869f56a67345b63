// `tinyllama validate` end to end on the CPU backend: exit 0 and a JSON
// report whose every check passed; bad flags are usage errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

TEST(ValidateCommand, CpuLevelPassesAndWritesEveryCheck) {
  const auto dir = scratch_dir("validate");
  const std::string json = (dir / "v.json").string();
  const RunResult r = run_tinyllama("validate --device cpu --version v3 --json " + json);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("validate: PASS, 3 cases"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(json));
  EXPECT_TRUE(j["pass"].get<bool>());
  ASSERT_EQ(j["cases"].size(), 3u);
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["level"], "v3");
    EXPECT_EQ(c["precision"], "float32");
    EXPECT_GT(c["checks"].size(), 10u);
    for (const auto& e : c["checks"]) EXPECT_TRUE(e["pass"].get<bool>()) << e.dump();
  }
  std::filesystem::remove_all(dir);
}

TEST(ValidateCommand, BadFlagsAreUsageErrors) {
  RunResult r = run_tinyllama("validate --version v9");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("v9"), std::string::npos) << r.err;
  r = run_tinyllama("validate --device tpu");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("allowed values are cpu, cuda, all"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tinyllama::testing
