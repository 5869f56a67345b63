// The CUDA backend's environment knobs (device/cuda_env.h), read on the
// host alone: a CPU test.
#include "device/cuda_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace tinyllama::cuda {
namespace {

constexpr const char* kKnob = "TINYLLAMA_TEST_WHOLE_NUMBER";

TEST(CudaEnv, AWholeNumberIsReadOrRefusedWithItsName) {
  ::unsetenv(kKnob);
  EXPECT_EQ(env_whole_number(kKnob, 64), -1);
  ::setenv(kKnob, "", 1);
  EXPECT_EQ(env_whole_number(kKnob, 64), -1);
  ::setenv(kKnob, "9", 1);
  EXPECT_EQ(env_whole_number(kKnob, 64), 9);
  ::setenv(kKnob, "0", 1);
  EXPECT_EQ(env_whole_number(kKnob, 64), 0);
  for (const char* bad : {"65", "-1", "9x", "nine"}) {
    ::setenv(kKnob, bad, 1);
    try {
      env_whole_number(kKnob, 64);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(kKnob), std::string::npos) << e.what();
    }
  }
  ::unsetenv(kKnob);
}

}  // namespace
}  // namespace tinyllama::cuda
