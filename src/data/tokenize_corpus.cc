#include "data/tokenize_corpus.h"

#include <string_view>

#include "core/errors.h"
#include "core/fingerprint.h"
#include "data/byte_tokenizer.h"
#include "data/documents.h"
#include "data/token_dataset.h"
#include "data/token_shard.h"
#include "io/file_bytes.h"

namespace tinyllama {
namespace {

// A shard is used as it is only when this tokenizer made it.
void append_shard(const SentencePieceTokenizer& tokenizer, const std::string& path,
                  const std::string& bytes, std::vector<std::uint32_t>& out) {
  const TokenShard shard =
      parse_token_shard(path, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  if (!(shard.tokenizer == shard_record_of(tokenizer))) {
    throw UsageError("--input " + path + ": made by another tokenizer (" +
                     (shard.tokenizer.recorded()
                          ? "fingerprint " + fingerprint_hex(shard.tokenizer.fingerprint)
                          : std::string("none recorded")) +
                     ") than --tokenizer " + tokenizer.describe());
  }
  out.insert(out.end(), shard.tokens.begin(), shard.tokens.end());
}

}  // namespace

ShardTokenizer shard_record_of(const SentencePieceTokenizer& t) {
  return {t.vocab_size(), t.fingerprint()};
}

TokenizedCorpus tokenize_corpus(const SentencePieceTokenizer& tokenizer,
                                const std::vector<std::string>& patterns,
                                const std::optional<std::string>& separator, int threads) {
  TokenizedCorpus corpus;
  std::vector<std::string> texts;  // kept alive: the documents point into them
  std::vector<std::string_view> documents;
  for (const std::string& pattern : patterns) {
    for (const std::string& path : expand_input_pattern("--input", pattern)) {
      std::string bytes = read_file_bytes("--input", path);
      if (looks_like_token_shard(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                 bytes.size())) {
        append_shard(tokenizer, path, bytes, corpus.tokens);
        continue;
      }
      const std::size_t bad = first_invalid_utf8(bytes);
      if (bad != std::string_view::npos) {
        corpus.notes.push_back("--input " + path + ": not UTF-8 at byte offset " +
                               std::to_string(bad) +
                               "; SentencePiece reads every invalid byte as U+FFFD");
      }
      corpus.text_bytes += static_cast<std::int64_t>(bytes.size());
      texts.push_back(std::move(bytes));
    }
  }
  for (const std::string& text : texts) {
    for (const std::string_view doc : split_documents(text, separator)) documents.push_back(doc);
  }
  const std::vector<std::vector<std::int32_t>> ids = tokenizer.encode_all(documents, threads);
  const SpecialIds special = tokenizer.special_ids();
  for (const std::vector<std::int32_t>& doc : ids) {
    if (special.bos >= 0) corpus.tokens.push_back(static_cast<std::uint32_t>(special.bos));
    corpus.tokens.insert(corpus.tokens.end(), doc.begin(), doc.end());
    if (special.eos >= 0) corpus.tokens.push_back(static_cast<std::uint32_t>(special.eos));
  }
  corpus.documents = static_cast<std::int64_t>(ids.size());
  return corpus;
}

}  // namespace tinyllama
