#pragma once
// llm.c's tokenized shards (karpathy/llm.c, dev/data/data_common.py), so data
// users already tokenized trains here as it is: a header of 256 little-endian
// int32 -- [0] the magic, [1] the version, [2] the token count -- then that
// many tokens. Two widths, as llm.c has them:
//   magic 20240520, version 1: uint16 tokens (GPT-2's vocabulary, and any
//     vocabulary of at most 65 536 ids);
//   magic 20240801, version 7: uint32 tokens (llm.c's LLaMA 3 shards; the
//     wider variant for vocabularies past 65 536 ids).
// tinyllama records the tokenizer that made a shard in header fields llm.c
// leaves zero, so a run can say which tokenizer its data came from and
// refuse one that does not match: [3] the tag 0x544F4B31 ("TOK1"), [4] the
// tokenizer's vocabulary size, [5] and [6] the low and high 32 bits of its
// fingerprint (core/fingerprint.h). A shard without the tag records none.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tinyllama {

constexpr std::int32_t kShardMagic = 20240520;
constexpr std::int32_t kShardVersion = 1;
constexpr std::int32_t kWideShardMagic = 20240801;
constexpr std::int32_t kWideShardVersion = 7;
constexpr std::size_t kShardHeaderBytes = 256 * sizeof(std::int32_t);
constexpr std::int32_t kTokenizerRecordTag = 0x544F4B31;
constexpr std::int64_t kNarrowShardVocab = 65536;  // ids 0..65535 fit uint16

// The tokenizer a shard's tokens came from; vocab_size 0: not recorded.
struct ShardTokenizer {
  int vocab_size = 0;
  std::uint64_t fingerprint = 0;

  bool recorded() const { return vocab_size > 0; }
  bool operator==(const ShardTokenizer&) const = default;
};

struct TokenShard {
  std::vector<std::uint32_t> tokens;
  ShardTokenizer tokenizer;
  bool wide = false;  // uint32 tokens
};

// Whether `data` starts like a shard of either width (the magic number):
// how --data tells a shard from a text file.
bool looks_like_token_shard(const std::uint8_t* data, std::size_t size);

// A whole shard in memory, validated (magic, version, the count against the
// size, nothing after the tokens). `name` stands for the file in the one-line
// RuntimeFailure.
TokenShard parse_token_shard(const std::string& name, const std::uint8_t* data, std::size_t size);

// Reads and validates a shard file (parse_token_shard's rules).
TokenShard read_token_shard(const std::string& path);

// The tokenizer a file's header records, read from the header alone; none
// for a file that is not a shard or records none.
ShardTokenizer read_shard_tokenizer(const std::string& path);

// Writes a shard atomically (io/atomic_file.h): uint16 tokens when the
// vocabulary (the tokenizer's, else the largest token + 1) fits 65 536 ids,
// else the uint32 variant. Throws RuntimeFailure naming the path.
void write_token_shard(const std::string& path, const std::vector<std::uint32_t>& tokens,
                       const ShardTokenizer& tokenizer = {});

}  // namespace tinyllama
