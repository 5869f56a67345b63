#include "dist/rank_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/errors.h"

namespace tinyllama::dist {
namespace {

using Vars = std::map<std::string, std::string>;

std::optional<RankEnv> from(const Vars& vars) {
  return rank_env_from([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// The UsageError's message, or "" when none was thrown.
std::string usage_error(const Vars& vars) {
  try {
    from(vars);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(RankEnv, NoWorldSizeIsASingleProcessRun) {
  EXPECT_FALSE(from({}).has_value());
  EXPECT_FALSE(from({{"RANK", "3"}, {"MASTER_PORT", "29500"}}).has_value());
  EXPECT_FALSE(from({{"WORLD_SIZE", ""}}).has_value());  // empty counts as unset
}

TEST(RankEnv, WorldOfOneNeedsNothingElse) {
  const auto env = from({{"WORLD_SIZE", "1"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world, 1);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->master_addr, "");
  EXPECT_EQ(env->master_port, 0);
  EXPECT_EQ(env->rendezvous_file, "");
}

TEST(RankEnv, TorchrunStyle) {
  const auto env = from({{"WORLD_SIZE", "8"},
                         {"RANK", "5"},
                         {"LOCAL_RANK", "1"},
                         {"MASTER_ADDR", "node0"},
                         {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->master_addr, "node0");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(RankEnv, Defaults) {
  // LOCAL_RANK defaults to RANK, MASTER_ADDR to 127.0.0.1 once a port is given.
  const auto env = from({{"WORLD_SIZE", "4"}, {"RANK", "2"}, {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  const auto file =
      from({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"TINYLLAMA_RENDEZVOUS_FILE", "/x/id"}});
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(file->rendezvous_file, "/x/id");
  EXPECT_EQ(file->master_addr, "");  // no port: no address invented
  EXPECT_EQ(file->master_port, 0);
  EXPECT_EQ(file->launcher_pid, 0);  // no launcher of ours: nothing relays
  const auto launched = from({{"WORLD_SIZE", "2"},
                              {"RANK", "0"},
                              {"TINYLLAMA_RENDEZVOUS_FILE", "/x/id"},
                              {"TINYLLAMA_LAUNCHER_PID", "4242"}});
  ASSERT_TRUE(launched.has_value());
  EXPECT_EQ(launched->launcher_pid, 4242);
}

TEST(RankEnv, OpenMpiFallbacks) {
  const auto env = from({{"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->world, 4);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->local_rank, 1);
}

TEST(RankEnv, PmiFallbacks) {
  const auto env = from({{"PMI_SIZE", "3"}, {"PMI_RANK", "2"}, {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->world, 3);
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->local_rank, 2);
}

TEST(RankEnv, OursWinOverMpirun) {
  const auto env = from({{"WORLD_SIZE", "2"},
                         {"RANK", "1"},
                         {"LOCAL_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "16"},
                         {"OMPI_COMM_WORLD_RANK", "9"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "7"},
                         {"PMI_SIZE", "16"},
                         {"PMI_RANK", "9"},
                         {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->world, 2);
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->local_rank, 0);
}

TEST(RankEnv, MalformedNumbersNameTheVariable) {
  const Vars port{{"MASTER_PORT", "29500"}};
  auto with = [&](Vars v) {
    v.insert(port.begin(), port.end());
    return usage_error(v);
  };
  EXPECT_NE(with({{"WORLD_SIZE", "two"}}).find("WORLD_SIZE='two'"), std::string::npos);
  EXPECT_NE(with({{"WORLD_SIZE", "2 "}}).find("WORLD_SIZE"), std::string::npos);
  EXPECT_NE(with({{"WORLD_SIZE", "2"}, {"RANK", "1x"}}).find("RANK='1x'"), std::string::npos);
  EXPECT_NE(with({{"WORLD_SIZE", "2"}, {"RANK", ""}}).find("RANK is not set"), std::string::npos);
  EXPECT_NE(with({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"LOCAL_RANK", "+"}}).find("LOCAL_RANK"),
            std::string::npos);
  EXPECT_NE(usage_error({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_PORT", "http"}})
                .find("MASTER_PORT='http'"),
            std::string::npos);
  EXPECT_NE(with({{"PMI_SIZE", "99999999999"}}).find("PMI_SIZE"), std::string::npos);
  EXPECT_NE(with({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "a"}})
                .find("OMPI_COMM_WORLD_RANK"),
            std::string::npos);
}

TEST(RankEnv, OutOfRangeValues) {
  const std::string port = "29500";
  EXPECT_NE(usage_error({{"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0"), std::string::npos);
  EXPECT_NE(usage_error({{"WORLD_SIZE", "-2"}}).find("at least 1"), std::string::npos);
  EXPECT_NE(usage_error({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_PORT", port}}).find("RANK=2"),
            std::string::npos);
  EXPECT_NE(usage_error({{"WORLD_SIZE", "2"}, {"RANK", "-1"}, {"MASTER_PORT", port}})
                .find("outside [0, 2)"),
            std::string::npos);
  EXPECT_NE(usage_error({{"WORLD_SIZE", "1"}, {"RANK", "1"}}).find("RANK=1"), std::string::npos);
  EXPECT_NE(
      usage_error({{"PMI_SIZE", "2"}, {"PMI_RANK", "5"}, {"MASTER_PORT", port}}).find("PMI_RANK=5"),
      std::string::npos);
  EXPECT_NE(
      usage_error({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_RANK", "-1"}, {"MASTER_PORT", port}})
          .find("LOCAL_RANK=-1"),
      std::string::npos);
  EXPECT_NE(usage_error({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT=70000"),
            std::string::npos);
}

TEST(RankEnv, SeveralRanksNeedAWayToMeet) {
  const std::string message = usage_error({{"WORLD_SIZE", "2"}, {"RANK", "0"}});
  EXPECT_NE(message.find("MASTER_PORT"), std::string::npos) << message;
  EXPECT_NE(message.find("--gpus"), std::string::npos) << message;
  // MASTER_ADDR alone is not enough, and a port of 0 is no port.
  EXPECT_NE(usage_error({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "h"}}), "");
  EXPECT_NE(usage_error({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "0"}}), "");
}

}  // namespace
}  // namespace tinyllama::dist
