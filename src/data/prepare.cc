#include "data/prepare.h"

#include <cstdio>
#include <filesystem>
#include <regex>

#include "core/errors.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/token_dataset.h"
#include "data/tokenize_corpus.h"
#include "io/atomic_file.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

std::string shard_name(const std::string& dir, const char* split, int index) {
  char name[32];
  std::snprintf(name, sizeof name, "%s_%06d.bin", split, index);
  return (fs::path(dir) / name).string();
}

// Shards of an earlier run would join a glob of this one's.
void require_no_shards(const std::string& dir) {
  static const std::regex kShard("(train|val)_[0-9]{6}\\.bin");
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (std::regex_match(e.path().filename().string(), kShard)) {
      throw UsageError("--output-dir " + dir + ": holds shards already (" +
                       e.path().filename().string() + "); choose an empty directory");
    }
  }
}

void check_options(const PrepareOptions& o) {
  if (!(o.val_fraction >= 0 && o.val_fraction < 1)) {
    throw UsageError("--val-fraction " + std::to_string(o.val_fraction) + ": must be in [0, 1)");
  }
  if (o.shard_tokens < 1 || o.shard_tokens > INT32_MAX) {
    throw UsageError("--shard-tokens " + std::to_string(o.shard_tokens) +
                     ": must be between 1 and 2147483647");
  }
  check_output_directory("--output-dir", o.out_dir);
}

// Byte-level tokens of the text (and the shards' tokens as they are).
std::vector<std::uint32_t> byte_level_tokens(const PrepareOptions& o, PrepareResult& r) {
  const TokenDataset data = load_token_dataset("--input", o.inputs);
  r.tokenizer = data.tokenizer();
  std::vector<std::uint32_t> all;
  for (const TokenPart& p : data.parts) all.insert(all.end(), p.tokens.begin(), p.tokens.end());
  return all;
}

void write_shards(const std::string& dir, const std::vector<std::uint32_t>& all,
                  const PrepareOptions& o, PrepareResult& r) {
  const auto val_count = static_cast<std::size_t>(static_cast<double>(all.size()) * o.val_fraction);
  const std::size_t train_count = all.size() - val_count;
  r.train_tokens = static_cast<std::int64_t>(train_count);
  r.val_tokens = static_cast<std::int64_t>(val_count);
  if (val_count > 0) {
    r.files.push_back(shard_name(dir, "val", 0));
    write_token_shard(r.files.back(), {all.begin() + static_cast<long>(train_count), all.end()},
                      r.tokenizer);
  }
  int index = 0;
  for (std::size_t at = 0; at < train_count; at += static_cast<std::size_t>(o.shard_tokens)) {
    const std::size_t end = std::min(train_count, at + static_cast<std::size_t>(o.shard_tokens));
    r.files.push_back(shard_name(dir, "train", index++));
    write_token_shard(r.files.back(),
                      {all.begin() + static_cast<long>(at), all.begin() + static_cast<long>(end)},
                      r.tokenizer);
  }
}

}  // namespace

PrepareResult prepare_shards(const PrepareOptions& o) {
  check_options(o);
  PrepareResult r;
  std::vector<std::uint32_t> all;
  std::optional<SentencePieceTokenizer> tokenizer;
  if (o.tokenizer.empty()) {
    all = byte_level_tokens(o, r);
  } else {
    tokenizer = SentencePieceTokenizer::load("--tokenizer", o.tokenizer);
    TokenizedCorpus corpus = tokenize_corpus(*tokenizer, o.inputs, o.doc_separator, o.threads);
    all = std::move(corpus.tokens);
    r.documents = corpus.documents;
    r.text_bytes = corpus.text_bytes;
    r.notes = std::move(corpus.notes);
    r.tokenizer = shard_record_of(*tokenizer);
  }
  for (const std::uint32_t t : all) r.max_token = std::max(r.max_token, static_cast<int>(t));
  fs::create_directories(o.out_dir);
  require_no_shards(o.out_dir);
  if (tokenizer) {
    // First, so shards never sit without the model that decodes them.
    r.files.push_back((fs::path(o.out_dir) / kShardTokenizerFile).string());
    write_atomically("--output-dir", r.files.back(),
                     [&](FileSink& out) { out.write(tokenizer->model_bytes()); });
  }
  write_shards(o.out_dir, all, o, r);
  return r;
}

}  // namespace tinyllama
