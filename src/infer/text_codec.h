#pragma once
// Text <-> token ids for `tinyllama generate`. TextCodec is the interface a
// tokenizer implements; ByteCodec is the one used until the project's
// tokenizer lands: every byte of UTF-8 text is one token (ids 0..255, so
// the model's vocabulary must be at least 256), and decoding writes ids
// below 256 back as bytes and any other id as <id>.
#include <cstdint>
#include <string>
#include <vector>

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
    std::vector<std::int32_t> ids;
    ids.reserve(text.size());
    for (unsigned char ch : text) ids.push_back(ch);
    return ids;
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    std::string out;
    for (std::int32_t id : ids) {
      if (id >= 0 && id < 256) {
        out.push_back(static_cast<char>(id));
      } else {
        out += "<" + std::to_string(id) + ">";
      }
    }
    return out;
  }
  int min_vocab() const override { return 256; }
};

}  // namespace tinyllama
