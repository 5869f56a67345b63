#pragma once
// Text <-> token ids for `tinyllama generate`. TextCodec is the interface a
// tokenizer implements:
// - ByteCodec, the byte-level tokenizer that `train --data` reads text with
//   (data/byte_tokenizer.h): a prompt is a document, the end-of-text token
//   256 and then one token per byte of its UTF-8, so a model trained on text
//   sees it as it saw its training documents. Its vocabulary must hold 257
//   ids; an id above 256 (a model trained with a larger --vocab-size) prints
//   as <id>.
// - SentencePieceCodec (infer/sentencepiece_codec.h), the subword tokenizer
//   `prepare --tokenizer` made the shards with: BOS, then the prompt's ids,
//   as transformers' LlamaTokenizer encodes a prompt; generation stops at EOS.
// - Gpt2Codec (infer/gpt2_codec.h), llm.c's gpt2_tokenizer.bin: decodes only.
#include <cstdint>
#include <string>
#include <vector>

#include "data/byte_tokenizer.h"

namespace tinyllama {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // Throws UsageError when the codec cannot encode (Gpt2Codec).
  virtual std::vector<std::int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<std::int32_t>& ids) const = 0;
  // The text `generated` adds after `prompt`: a subword tokenizer decodes a
  // word's leading space only after other text, so the two are decoded
  // together.
  virtual std::string decode_continuation(const std::vector<std::int32_t>& /*prompt*/,
                                          const std::vector<std::int32_t>& generated) const {
    return decode(generated);
  }
  // The smallest vocabulary the codec's ids fit in.
  virtual int min_vocab() const = 0;
  // The id that ends generation (EOS); -1: none, generate runs to the end.
  virtual int stop_id() const { return -1; }
  // One line for the run's note, e.g. "byte-level".
  virtual std::string describe() const = 0;
};

class ByteCodec final : public TextCodec {
 public:
  std::vector<std::int32_t> encode(const std::string& text) const override {
    const std::vector<std::uint16_t> tokens = encode_document(text);
    return {tokens.begin(), tokens.end()};
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    std::string out;
    for (std::int32_t id : ids) {
      if (id >= 0 && id <= kEndOfText) {
        out += decode_tokens({static_cast<std::uint16_t>(id)});
      } else {
        out += "<" + std::to_string(id) + ">";
      }
    }
    return out;
  }
  int min_vocab() const override { return kByteVocab; }
  std::string describe() const override { return "byte-level"; }
};

}  // namespace tinyllama
