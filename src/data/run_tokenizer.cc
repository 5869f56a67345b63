#include "data/run_tokenizer.h"

#include <filesystem>

#include "core/errors.h"
#include "core/fingerprint.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "data/token_shard.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

struct RecordedBy {
  std::string shard;
  ShardTokenizer tokenizer;
};

// The first shard of --data that records a tokenizer (load_token_dataset
// has checked that they all record the same one).
std::optional<RecordedBy> shards_record(const std::vector<std::string>& data) {
  for (const std::string& pattern : data) {
    for (const std::string& file : expand_input_pattern("--data", pattern)) {
      const ShardTokenizer t = read_shard_tokenizer(file);
      if (t.recorded()) return RecordedBy{file, t};
    }
  }
  return std::nullopt;
}

// The model beside the shards when it is the one they record, else only
// the record (config.json keeps it; the model files are left out).
HfTokenizer from_shards(const RecordedBy& by) {
  const fs::path beside = fs::path(by.shard).parent_path() / kShardTokenizerFile;
  std::error_code ec;
  if (fs::is_regular_file(beside, ec)) {
    SentencePieceTokenizer t = SentencePieceTokenizer::load("--data", beside.string());
    if (t.fingerprint() != by.tokenizer.fingerprint) {
      throw UsageError("--data " + by.shard + ": records tokenizer fingerprint " +
                       fingerprint_hex(by.tokenizer.fingerprint) + ", but " + t.describe() +
                       " beside it is another");
    }
    return hf_tokenizer_of(t);
  }
  HfTokenizer record;
  record.fingerprint = by.tokenizer.fingerprint;
  record.vocab_size = by.tokenizer.vocab_size;
  return record;
}

std::optional<SentencePieceTokenizer> directory_tokenizer(const std::string& init_from) {
  const fs::path model = fs::path(init_from) / kHfTokenizerModel;
  std::error_code ec;
  if (init_from.empty() || !fs::is_directory(init_from, ec) || !fs::is_regular_file(model, ec)) {
    return std::nullopt;
  }
  return SentencePieceTokenizer::load("--init-from", model.string());
}

}  // namespace

HfTokenizer hf_tokenizer_of(const SentencePieceTokenizer& t) {
  HfTokenizer hf;
  hf.model_bytes = t.model_bytes();
  hf.fingerprint = t.fingerprint();
  hf.vocab_size = t.vocab_size();
  const SpecialIds ids = t.special_ids();
  hf.unk_id = ids.unk;
  hf.bos_id = ids.bos;
  hf.eos_id = ids.eos;
  hf.pad_id = ids.pad;
  auto piece = [&](int id) { return id >= 0 ? t.piece(id) : std::string(); };
  hf.unk_piece = piece(ids.unk);
  hf.bos_piece = piece(ids.bos);
  hf.eos_piece = piece(ids.eos);
  hf.pad_piece = piece(ids.pad);
  return hf;
}

std::optional<HfTokenizer> run_tokenizer(const std::vector<std::string>& data,
                                         const std::string& init_from, int vocab_size) {
  const std::optional<RecordedBy> by = shards_record(data);
  const std::optional<SentencePieceTokenizer> from_dir = directory_tokenizer(init_from);
  if (by && from_dir && from_dir->fingerprint() != by->tokenizer.fingerprint) {
    throw UsageError("--init-from " + init_from + ": its tokenizer " + from_dir->describe() +
                     " did not make the --data shards (" + by->shard + " records fingerprint " +
                     fingerprint_hex(by->tokenizer.fingerprint) + ")");
  }
  if (!by && from_dir && !data.empty()) {
    throw UsageError("--init-from " + init_from + ": its tokenizer " + from_dir->describe() +
                     " did not make the --data tokens (byte-level text, or shards that record "
                     "no tokenizer); prepare them with --tokenizer " +
                     from_dir->path());
  }
  std::optional<HfTokenizer> chosen;
  if (from_dir) {
    chosen = hf_tokenizer_of(*from_dir);
  } else if (by) {
    chosen = from_shards(*by);
  }
  if (chosen && chosen->vocab_size > vocab_size) {
    throw UsageError("--vocab-size " + std::to_string(vocab_size) + ": the tokenizer of " +
                     (from_dir ? "--init-from " + init_from : "--data " + by->shard) + " has " +
                     std::to_string(chosen->vocab_size) + " ids; needs --vocab-size " +
                     std::to_string(chosen->vocab_size) + " or more");
  }
  return chosen;
}

}  // namespace tinyllama
