#pragma once
// The tokenizer files of a Hugging Face LLaMA directory, as Llama 2's
// repositories hold them: tokenizer.model (the SentencePiece model itself),
// tokenizer_config.json (LlamaTokenizer, BOS added before a text, no EOS)
// and special_tokens_map.json, with the special ids in config.json, so
// AutoTokenizer.from_pretrained(DIR) and pipeline("text-generation",
// model=DIR) work as is. config.json also records the tokenizer's
// fingerprint and vocabulary (key "tinyllama_tokenizer"), so `generate`
// can refuse another tokenizer even where only the record survives.
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tinyllama {

constexpr const char* kHfTokenizerModel = "tokenizer.model";

struct HfTokenizer {
  std::string model_bytes;  // tokenizer.model; empty: the record in config.json only
  std::uint64_t fingerprint = 0;
  int vocab_size = 0;
  int unk_id = -1;  // -1: the model has no such token
  int bos_id = -1;
  int eos_id = -1;
  int pad_id = -1;
  std::string unk_piece;
  std::string bos_piece;
  std::string eos_piece;
  std::string pad_piece;
};

// Which tokenizer a directory's model was trained with, as far as known.
struct HfTokenizerRecord {
  bool present = false;
  std::uint64_t fingerprint = 0;
  int vocab_size = 0;  // 0: not recorded
};

// Sets config.json's bos/eos/pad_token_id and the tinyllama_tokenizer record.
void add_tokenizer_to_config(nlohmann::json& config, const HfTokenizer& tokenizer);

// Writes DIR/tokenizer.model, tokenizer_config.json and
// special_tokens_map.json, each complete or absent; nothing when the model
// bytes are unknown. `max_positions` is the model_max_length.
void write_hf_tokenizer_files(const std::string& dir, const HfTokenizer& tokenizer,
                              int max_positions);

// config.json's record: its tinyllama_tokenizer key, else the fingerprint
// of DIR/tokenizer.model when there is one (a directory transformers
// saved). Throws UsageError naming the file for a malformed record.
HfTokenizerRecord read_hf_tokenizer_record(const std::string& dir);

}  // namespace tinyllama
