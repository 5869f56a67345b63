#pragma once
// llm.c's gpt2_tokenizer.bin (karpathy/llm.c, train_gpt2.py write_tokenizer),
// read for decoding, so a model trained on llm.c's GPT-2 shards prints text:
// a header of 256 little-endian uint32 -- [0] the magic 20240328, [1] the
// version (1, or 2 which adds [3]), [2] the vocabulary size, [3] the
// end-of-text id (version 1: GPT-2's 50256) -- then for each id its bytes,
// as a length byte (1-255) and that many bytes. The file holds no merges, so
// it cannot encode text: prompts for such a model are --prompt-ids.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tinyllama {

constexpr std::uint32_t kGpt2TokenizerMagic = 20240328;
constexpr std::size_t kGpt2TokenizerHeaderBytes = 256 * sizeof(std::uint32_t);

struct Gpt2Tokenizer {
  std::vector<std::string> pieces;  // the bytes of each id
  int end_of_text = -1;

  int vocab_size() const { return static_cast<int>(pieces.size()); }
  // The ids' bytes concatenated (an id outside the vocabulary as "<id>").
  std::string decode(const std::vector<std::int32_t>& ids) const;
};

// Whether `data` starts with the magic number: how --tokenizer tells this
// file from a SentencePiece model.
bool looks_like_gpt2_tokenizer(const std::uint8_t* data, std::size_t size);

// The vocabulary, validated: magic, version, a vocabulary size in
// [1, 2^24], an end-of-text id inside it, every entry 1-255 bytes, the file
// ending right after the last one. Throws UsageError "NAME: what is wrong".
Gpt2Tokenizer parse_gpt2_tokenizer(const std::string& name, const std::uint8_t* data,
                                   std::size_t size);

// Reads a file by parse_gpt2_tokenizer's rules; FLAG names the flag in
// messages (may be empty).
Gpt2Tokenizer read_gpt2_tokenizer(const std::string& flag, const std::string& path);

}  // namespace tinyllama
