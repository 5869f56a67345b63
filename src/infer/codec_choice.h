#pragma once
// Which tokenizer `generate` reads and writes text with: --tokenizer FILE (a
// SentencePiece .model or llm.c's gpt2_tokenizer.bin, told apart by its
// magic number), else the tokenizer.model that --export-hf put beside the
// weights, else byte-level tokens. Apart from the CLI so its refusals are
// unit-tested.
#include <memory>
#include <string>

#include "infer/text_codec.h"
#include "model/config.h"

namespace tinyllama {

// A tokenizer file by its magic number: llm.c's gpt2_tokenizer.bin, else a
// SentencePiece model. Throws UsageError "FLAG PATH: ..." when it is
// neither, or missing or truncated.
std::unique_ptr<TextCodec> load_tokenizer_file(const std::string& flag, const std::string& path);

// Throws UsageError naming the file and the mismatch for a missing,
// truncated or wrong-type tokenizer file, a tokenizer with more ids than the
// model's vocabulary, or one other than the tokenizer the weights' directory
// records (config.json's tinyllama_tokenizer, or its tokenizer.model).
std::unique_ptr<TextCodec> choose_text_codec(const std::string& tokenizer,
                                             const std::string& weights, const ModelConfig& config);

}  // namespace tinyllama
