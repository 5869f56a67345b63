#pragma once
// Text <-> token ids for `tinyllama generate`. TextCodec is the interface a
// tokenizer implements; ByteCodec is the byte-level tokenizer that `train
// --data` reads text with (data/byte_tokenizer.h): a prompt is a document,
// the end-of-text token 256 and then one token per byte of its UTF-8, so a
// model trained on text sees it as it saw its training documents. Its
// vocabulary must hold 257 ids; an id above 256 (a model trained with a
// larger --vocab-size) prints as <id>.
#include <cstdint>
#include <string>
#include <vector>

#include "data/byte_tokenizer.h"

namespace tinyllama {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<std::int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<std::int32_t>& ids) const = 0;
  // The smallest vocabulary the codec's ids fit in.
  virtual int min_vocab() const = 0;
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
};

}  // namespace tinyllama
