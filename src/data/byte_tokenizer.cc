#include "data/byte_tokenizer.h"

namespace tinyllama {

std::vector<std::uint16_t> encode_document(std::string_view text) {
  std::vector<std::uint16_t> out;
  out.reserve(text.size() + 1);
  out.push_back(kEndOfText);
  for (const char c : text) out.push_back(static_cast<unsigned char>(c));
  return out;
}

std::string decode_tokens(const std::vector<std::uint16_t>& tokens) {
  std::string out;
  for (const std::uint16_t t : tokens) {
    if (t == kEndOfText) {
      out += "\n<|endoftext|>\n";
    } else if (t < 256) {
      out += static_cast<char>(t);
    }
  }
  return out;
}

std::size_t first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid.
    const std::uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace tinyllama
