// libFuzzer target: the reader of llm.c's gpt2_tokenizer.bin on arbitrary
// bytes (see fuzz_safetensors.cc for the rules): it either refuses them
// with a UsageError or returns a vocabulary whose entries account for every
// byte of the file.
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "data/gpt2_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tinyllama::Gpt2Tokenizer t = tinyllama::parse_gpt2_tokenizer("fuzz", data, size);
    std::size_t bytes = tinyllama::kGpt2TokenizerHeaderBytes;
    for (const std::string& piece : t.pieces) {
      if (piece.empty() || piece.size() > 255) __builtin_trap();
      bytes += 1 + piece.size();
    }
    if (bytes != size || t.end_of_text < 0 || t.end_of_text >= t.vocab_size()) __builtin_trap();
    if (t.decode({t.end_of_text, -1, t.vocab_size()}).empty()) __builtin_trap();
  } catch (const tinyllama::UsageError&) {
  }
  return 0;
}
