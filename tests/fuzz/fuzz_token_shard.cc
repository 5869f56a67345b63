// libFuzzer target: the llm.c token shard reader on arbitrary bytes (see
// fuzz_safetensors.cc for the rules).
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "data/token_shard.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const bool shard = tinyllama::looks_like_token_shard(data, size);
    const auto tokens = tinyllama::parse_token_shard("fuzz", data, size);
    if (!shard || tokens.size() * 2 + tinyllama::kShardHeaderBytes != size) __builtin_trap();
  } catch (const tinyllama::RuntimeFailure&) {
  }
  return 0;
}
