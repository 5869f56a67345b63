#pragma once
// The tokens a run trains (or evaluates) on, from --data / --val-data: each
// argument a file or a glob; each file an llm.c token shard
// (data/token_shard.h) or UTF-8 text, tokenized by the byte-level tokenizer
// (data/byte_tokenizer.h) as one document. Files are kept apart, so no
// training row spans two of them. Shards made by `prepare --tokenizer`
// record their tokenizer (data/token_shard.h); a dataset holds the tokens of
// one tokenizer only.
#include <cstdint>
#include <string>
#include <vector>

#include "data/token_shard.h"

namespace tinyllama {

struct TokenPart {
  std::string file;
  std::vector<std::uint32_t> tokens;
  ShardTokenizer tokenizer;  // the one its shard records; none for text
};

struct TokenDataset {
  std::vector<TokenPart> parts;

  std::int64_t tokens() const;
  int max_token() const;  // -1 when empty
  // The tokenizer every part records (none when the parts record none).
  ShardTokenizer tokenizer() const;
  // One line naming the files and counts, e.g. "2 files, 40960 tokens",
  // and the tokenizer the shards record ("..., tokenizer vocabulary 8000,
  // fingerprint 0123456789abcdef").
  std::string description() const;
  // What a checkpoint records to recognise the data: every file name and
  // token count (contents are not hashed: renaming a file is a change).
  std::string fingerprint() const;
};

// The files a pattern names: sorted glob matches, or the path itself.
// Throws UsageError "FLAG PATTERN: ..." when it matches nothing.
std::vector<std::string> expand_input_pattern(const std::string& flag, const std::string& pattern);

// Expands `patterns` (in the order given) and reads every file. Throws
// UsageError "FLAG PATTERN: ..." for a pattern that matches nothing, a
// directory, text that is not UTF-8 (with the byte offset), or shards of
// different tokenizers (or shards beside text); a corrupt shard is a
// RuntimeFailure naming the file.
TokenDataset load_token_dataset(const std::string& flag, const std::vector<std::string>& patterns);

// The last `fraction` of every part's tokens, held out (second), and the
// rest (first).
std::pair<TokenDataset, TokenDataset> split_tail(const TokenDataset& data, double fraction);

}  // namespace tinyllama
