#include "infer/codec_choice.h"

#include <filesystem>

#include "core/errors.h"
#include "core/fingerprint.h"
#include "infer/gpt2_codec.h"
#include "infer/sentencepiece_codec.h"
#include "io/file_bytes.h"
#include "io/hf_tokenizer.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

HfTokenizerRecord weights_record(const std::string& weights) {
  std::error_code ec;
  return fs::is_directory(weights, ec) ? read_hf_tokenizer_record(weights) : HfTokenizerRecord{};
}

// A tokenizer other than the one the model was trained with reads its ids
// as other text.
void require_recorded(const std::string& path, const HfTokenizerRecord& record,
                      const std::string& weights) {
  if (!record.present) return;
  const std::uint64_t given = fingerprint_of(read_file_bytes("--tokenizer", path));
  if (given != record.fingerprint) {
    throw UsageError("--tokenizer " + path + ": not the tokenizer " + weights +
                     " was trained with (fingerprint " + fingerprint_hex(given) +
                     "; the model records " + fingerprint_hex(record.fingerprint) + ")");
  }
}

}  // namespace

std::unique_ptr<TextCodec> load_tokenizer_file(const std::string& flag, const std::string& path) {
  std::string bytes = read_file_bytes(flag, path);
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  if (looks_like_gpt2_tokenizer(data, bytes.size())) {
    return std::make_unique<Gpt2Codec>(parse_gpt2_tokenizer(flag + " " + path, data, bytes.size()),
                                       path);
  }
  return std::make_unique<SentencePieceCodec>(
      SentencePieceTokenizer::from_bytes(flag, path, std::move(bytes)));
}

std::unique_ptr<TextCodec> choose_text_codec(const std::string& tokenizer,
                                             const std::string& weights,
                                             const ModelConfig& config) {
  const HfTokenizerRecord record = weights_record(weights);
  std::unique_ptr<TextCodec> codec;
  std::string source = tokenizer;
  if (!tokenizer.empty()) {
    codec = load_tokenizer_file("--tokenizer", tokenizer);
  } else if (const fs::path beside = fs::path(weights) / kHfTokenizerModel;
             std::filesystem::is_regular_file(beside)) {
    source = beside.string();
    codec = std::make_unique<SentencePieceCodec>(SentencePieceTokenizer::load("--weights", source));
  } else if (record.present) {
    throw UsageError("--weights " + weights + ": the model was trained on tokenizer fingerprint " +
                     fingerprint_hex(record.fingerprint) +
                     ", which is not beside it; give it with --tokenizer");
  } else {
    return std::make_unique<ByteCodec>();
  }
  if (codec->min_vocab() > config.vocab_size) {
    throw UsageError((tokenizer.empty() ? "--weights " : "--tokenizer ") + source + ": has " +
                     std::to_string(codec->min_vocab()) +
                     " ids, more than the model's vocabulary of " +
                     std::to_string(config.vocab_size) + " (" + weights + ")");
  }
  if (!tokenizer.empty()) require_recorded(tokenizer, record, weights);
  return codec;
}

}  // namespace tinyllama
