#include "io/hf_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/fingerprint.h"
#include "io/atomic_file.h"
#include "io/file_bytes.h"
#include "io/json_file.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kRecordKey = "tinyllama_tokenizer";

json id_or_null(int id) {
  return id >= 0 ? json(id) : json(nullptr);
}

json piece_or_null(int id, const std::string& piece) {
  return id >= 0 ? json(piece) : json(nullptr);
}

json special_tokens(const HfTokenizer& t) {
  return {{"bos_token", piece_or_null(t.bos_id, t.bos_piece)},
          {"eos_token", piece_or_null(t.eos_id, t.eos_piece)},
          {"unk_token", piece_or_null(t.unk_id, t.unk_piece)},
          {"pad_token", piece_or_null(t.pad_id, t.pad_piece)}};
}

// Llama 2's tokenizer_config.json, but with legacy true: transformers then
// encodes with SentencePiece as it is, which is what tinyllama encodes with.
// add_prefix_space is left out (true): false would also drop the dummy
// prefix when encoding, so "The" would no longer be the piece " The". As for
// Llama 2, decoding drops the space of the first piece, so transformers'
// text-generation pipeline, which in the transformers the device ran
// (v5 line; described in transformers PR 45860) returns prompt + decode(new ids), joins "The" and "
// following" as "Thefollowing"; no setting here changes that without also giving every
// whole-sequence decode a leading space (docs/TOKENIZER.md).
json tokenizer_config(const HfTokenizer& t, int max_positions) {
  json config = special_tokens(t);
  config["tokenizer_class"] = "LlamaTokenizer";
  config["add_bos_token"] = t.bos_id >= 0;
  config["add_eos_token"] = false;
  config["legacy"] = true;
  config["clean_up_tokenization_spaces"] = false;
  config["model_max_length"] = max_positions;
  config["sp_model_kwargs"] = json::object();
  return config;
}

void write_text(const fs::path& path, const std::string& text) {
  write_atomically("", path.string(), [&](FileSink& out) { out.write(text); });
}

}  // namespace

void add_tokenizer_to_config(json& config, const HfTokenizer& t) {
  config["bos_token_id"] = id_or_null(t.bos_id);
  config["eos_token_id"] = id_or_null(t.eos_id);
  config["pad_token_id"] = id_or_null(t.pad_id);
  config[kRecordKey] = {{"fingerprint", fingerprint_hex(t.fingerprint)},
                        {"vocab_size", t.vocab_size}};
}

void write_hf_tokenizer_files(const std::string& dir, const HfTokenizer& t, int max_positions) {
  if (t.model_bytes.empty()) return;
  const fs::path d(dir);
  write_text(d / kHfTokenizerModel, t.model_bytes);
  write_text(d / "tokenizer_config.json", tokenizer_config(t, max_positions).dump(2) + "\n");
  write_text(d / "special_tokens_map.json", special_tokens(t).dump(2) + "\n");
}

HfTokenizerRecord read_hf_tokenizer_record(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / "config.json";
  const json config = read_json_object(config_path.string());
  HfTokenizerRecord r;
  const auto it = config.is_object() ? config.find(kRecordKey) : config.end();
  if (it != config.end()) {
    const json& rec = *it;
    try {
      r.fingerprint = std::stoull(rec.at("fingerprint").get<std::string>(), nullptr, 16);
      r.vocab_size = rec.at("vocab_size").get<int>();
      r.present = true;
    } catch (const std::exception&) {
      throw UsageError(config_path.string() + ": " + kRecordKey + " is " + rec.dump() +
                       ", expected {\"fingerprint\": 16 hex digits, \"vocab_size\": N}");
    }
    return r;
  }
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / kHfTokenizerModel, ec)) {
    r.fingerprint =
        fingerprint_of(read_file_bytes("", (fs::path(dir) / kHfTokenizerModel).string()));
    r.present = true;
  }
  return r;
}

}  // namespace tinyllama
