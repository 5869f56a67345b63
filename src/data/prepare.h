#pragma once
// `tinyllama prepare`: text (or shards) in, llm.c token shards out, so a
// corpus is tokenized once and trained on many times: DIR/val_000000.bin
// holds the held-out tail, DIR/train_000000.bin... the rest, each at most
// shard_tokens tokens.
#include <cstdint>
#include <string>
#include <vector>

namespace tinyllama {

struct PrepareResult {
  std::vector<std::string> files;  // written, val first
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;
  int max_token = -1;
};

// Throws UsageError naming the flag (--input, --output-dir, --val-fraction,
// --shard-tokens) for bad input, RuntimeFailure for a failed write.
PrepareResult prepare_shards(const std::vector<std::string>& inputs, const std::string& out_dir,
                             double val_fraction, std::int64_t shard_tokens);

}  // namespace tinyllama
