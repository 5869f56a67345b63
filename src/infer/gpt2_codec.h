#pragma once
// generate's codec for llm.c's gpt2_tokenizer.bin (infer/text_codec.h): it
// holds each id's bytes but not GPT-2's merges, so it decodes only and a
// prompt is given as --prompt-ids. Generation runs to --max-new-tokens, as
// llm.c's sampler does, through end-of-text tokens.
#include <string>

#include "core/errors.h"
#include "data/gpt2_tokenizer.h"
#include "infer/text_codec.h"

namespace tinyllama {

class Gpt2Codec final : public TextCodec {
 public:
  Gpt2Codec(Gpt2Tokenizer tokenizer, std::string path)
      : tokenizer_(std::move(tokenizer)), path_(std::move(path)) {}

  std::vector<std::int32_t> encode(const std::string& /*text*/) const override {
    throw UsageError("--prompt: " + path_ +
                     " is llm.c's gpt2_tokenizer.bin, which holds no merges and cannot encode "
                     "text; give the prompt as --prompt-ids");
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    return tokenizer_.decode(ids);
  }
  int min_vocab() const override { return tokenizer_.vocab_size(); }
  std::string describe() const override {
    return "llm.c GPT-2 " + path_ + " (vocabulary " + std::to_string(tokenizer_.vocab_size()) +
           ", decoding only)";
  }

 private:
  Gpt2Tokenizer tokenizer_;
  std::string path_;
};

}  // namespace tinyllama
