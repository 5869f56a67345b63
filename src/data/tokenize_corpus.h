#pragma once
// A corpus through a SentencePiece tokenizer, for `prepare --tokenizer`:
// text files cut into documents (data/documents.h), each written as BOS,
// its ids, EOS, the documents encoded on every core; token shards already
// made by the same tokenizer taken as they are (ahead of the text's tokens).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/sentencepiece_tokenizer.h"
#include "data/token_shard.h"

namespace tinyllama {

struct TokenizedCorpus {
  std::vector<std::uint32_t> tokens;
  std::int64_t documents = 0;
  std::int64_t text_bytes = 0;
  std::vector<std::string> notes;  // one line each, e.g. where text is not UTF-8
};

// What a shard records of this tokenizer (data/token_shard.h).
ShardTokenizer shard_record_of(const SentencePieceTokenizer& tokenizer);

// Throws UsageError "--input FILE: ..." for a pattern matching nothing, a
// directory, or a shard that records another tokenizer (or none).
TokenizedCorpus tokenize_corpus(const SentencePieceTokenizer& tokenizer,
                                const std::vector<std::string>& patterns,
                                const std::optional<std::string>& separator, int threads);

}  // namespace tinyllama
