#pragma once
// Two kinds of failure with their own exit codes (DESIGN §4): bad usage (2)
// and a failure at run time (1). Both carry one line meant for the user.
#include <stdexcept>
#include <string>

namespace tinyllama {

struct UsageError : std::runtime_error {
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

struct RuntimeFailure : std::runtime_error {
  explicit RuntimeFailure(const std::string& what) : std::runtime_error(what) {}
};

constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;

}  // namespace tinyllama
