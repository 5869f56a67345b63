#pragma once
// A SentencePiece model (the tokenizer library of the LLaMA family) read
// from its .model file: what `prepare --tokenizer` encodes corpora with,
// `generate --tokenizer` encodes prompts and decodes continuations with, and
// `--export-hf` copies beside the weights. The file's bytes are kept, so its
// fingerprint (core/fingerprint.h) and its copies are of exactly what was
// loaded.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tinyllama {

// -1 where the model has no such token.
struct SpecialIds {
  int unk = -1;
  int bos = -1;
  int eos = -1;
  int pad = -1;
};

// SentencePiece's status text without the source location it starts with
// ("Internal: ./src/x.cc(12) [check] Vocabulary size is ..." -> "Vocabulary
// size is ..."), for one-line errors.
std::string sentencepiece_reason(const std::string& status_text);

class SentencePieceTokenizer {
 public:
  // Throws UsageError "FLAG PATH: ..." for a missing or unreadable file, or
  // one that is not a SentencePiece model (truncated, another format, no
  // pieces). FLAG may be empty.
  static SentencePieceTokenizer load(const std::string& flag, const std::string& path);
  // The same from the file's bytes; `path` names them in messages.
  static SentencePieceTokenizer from_bytes(const std::string& flag, const std::string& path,
                                           std::string bytes);

  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;
  ~SentencePieceTokenizer();

  // SentencePiece's ids for `text`, no BOS or EOS. Bytes that are not valid
  // UTF-8 are read as U+FFFD each, as SentencePiece itself does.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // encode() of every text, spread over every core; the result in order.
  std::vector<std::vector<std::int32_t>> encode_all(const std::vector<std::string_view>& texts,
                                                    int threads = 0) const;
  // Text of the ids; BOS, EOS and other control tokens read as nothing, an
  // id outside the vocabulary as "<id>".
  std::string decode(const std::vector<std::int32_t>& ids) const;

  int vocab_size() const;
  SpecialIds special_ids() const;
  const std::string& piece(int id) const;
  const std::string& path() const { return path_; }
  const std::string& model_bytes() const { return bytes_; }
  std::uint64_t fingerprint() const { return fingerprint_; }
  // "PATH (vocabulary 8000, fingerprint 0123456789abcdef)".
  std::string describe() const;

 private:
  SentencePieceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
  std::string bytes_;
  std::uint64_t fingerprint_ = 0;
};

}  // namespace tinyllama
