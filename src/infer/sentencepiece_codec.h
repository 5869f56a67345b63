#pragma once
// generate's codec for a SentencePiece model (infer/text_codec.h).
#include "data/sentencepiece_tokenizer.h"
#include "infer/text_codec.h"

namespace tinyllama {

class SentencePieceCodec final : public TextCodec {
 public:
  explicit SentencePieceCodec(SentencePieceTokenizer tokenizer)
      : tokenizer_(std::move(tokenizer)) {}

  std::vector<std::int32_t> encode(const std::string& text) const override {
    std::vector<std::int32_t> ids;
    if (tokenizer_.special_ids().bos >= 0) ids.push_back(tokenizer_.special_ids().bos);
    const std::vector<std::int32_t> body = tokenizer_.encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    return tokenizer_.decode(ids);
  }
  std::string decode_continuation(const std::vector<std::int32_t>& prompt,
                                  const std::vector<std::int32_t>& generated) const override {
    std::vector<std::int32_t> all = prompt;
    all.insert(all.end(), generated.begin(), generated.end());
    const std::string head = decode(prompt);
    const std::string whole = decode(all);
    return whole.compare(0, head.size(), head) == 0 ? whole.substr(head.size()) : decode(generated);
  }
  int min_vocab() const override { return tokenizer_.vocab_size(); }
  int stop_id() const override { return tokenizer_.special_ids().eos; }
  std::string describe() const override { return "SentencePiece " + tokenizer_.describe(); }
  const SentencePieceTokenizer& tokenizer() const { return tokenizer_; }

 private:
  SentencePieceTokenizer tokenizer_;
};

}  // namespace tinyllama
