#pragma once
// Environment switches of the CUDA backend (TINYLLAMA_GEMM_AUTOTUNE,
// TINYLLAMA_STREAM_PRIORITIES, ...), read one way everywhere.
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/errors.h"

namespace tinyllama::cuda {

// An environment variable's value as a switch: unset or empty gives the
// fallback, 0/off/false/no turn it off, anything else on.
inline bool env_flag(const char* v, bool fallback) {
  if (v == nullptr || *v == '\0') return fallback;
  for (const char* off : {"0", "off", "false", "no", "OFF", "FALSE", "NO"}) {
    if (std::strcmp(v, off) == 0) return false;
  }
  return true;
}

// An environment variable's value as a whole number from 0 to `most`
// (the knobs that measure a size: TINYLLAMA_GEMM_WORKSPACE_MIB, ...): -1
// when unset or empty; anything else is a UsageError naming the variable.
inline long env_whole_number(const char* name, long most) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > most) {
    throw UsageError(std::string(name) + ": expected a whole number from 0 to " +
                     std::to_string(most) + ", got \"" + v + "\"");
  }
  return n;
}

}  // namespace tinyllama::cuda
