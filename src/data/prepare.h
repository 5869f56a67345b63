#pragma once
// `tinyllama prepare`: text (or shards) in, llm.c token shards out, so a
// corpus is tokenized once and trained on many times: DIR/val_000000.bin
// holds the held-out tail, DIR/train_000000.bin... the rest, each at most
// shard_tokens tokens. Without a tokenizer the text is byte-level tokens
// (data/byte_tokenizer.h); with one (a SentencePiece model) it is cut into
// documents of BOS, ids, EOS (data/tokenize_corpus.h), every shard records
// the tokenizer (data/token_shard.h) and a copy of the model goes beside
// them as DIR/tokenizer.model, where `train --export-hf` finds it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/token_shard.h"

namespace tinyllama {

constexpr const char* kShardTokenizerFile = "tokenizer.model";

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  double val_fraction = 0.1;
  std::int64_t shard_tokens = 100000000;
  std::string tokenizer;                                     // "" : byte-level tokens
  std::optional<std::string> doc_separator = std::string();  // with a tokenizer; none: whole files
  int threads = 0;                                           // 0: every core
};

struct PrepareResult {
  std::vector<std::string> files;  // written, val first
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;
  int max_token = -1;
  std::int64_t documents = 0;      // with a tokenizer
  std::int64_t text_bytes = 0;     // with a tokenizer
  ShardTokenizer tokenizer;        // recorded in every shard
  std::vector<std::string> notes;  // one line each
};

// Throws UsageError naming the flag (--input, --output-dir, --val-fraction,
// --shard-tokens, --tokenizer) for bad input, RuntimeFailure for a failed
// write.
PrepareResult prepare_shards(const PrepareOptions& options);

}  // namespace tinyllama
