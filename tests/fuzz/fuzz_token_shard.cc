// libFuzzer target: the llm.c token shard reader (both widths) on arbitrary
// bytes (see fuzz_safetensors.cc for the rules).
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "data/token_shard.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const bool shard = tinyllama::looks_like_token_shard(data, size);
    const tinyllama::TokenShard parsed = tinyllama::parse_token_shard("fuzz", data, size);
    const std::size_t width = parsed.wide ? 4 : 2;
    if (!shard || parsed.tokens.size() * width + tinyllama::kShardHeaderBytes != size) {
      __builtin_trap();
    }
  } catch (const tinyllama::RuntimeFailure&) {
  }
  return 0;
}
