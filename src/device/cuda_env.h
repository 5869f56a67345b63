#pragma once
// Environment switches of the CUDA backend (TINYLLAMA_GEMM_AUTOTUNE,
// TINYLLAMA_STREAM_PRIORITIES, ...), read one way everywhere.
#include <cstring>

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

}  // namespace tinyllama::cuda
