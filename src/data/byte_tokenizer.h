#pragma once
// The built-in tokenizer for plain text: one token per byte (0-255) and an
// end-of-text token (256) that starts every document, as llm.c's shards
// start each document with GPT-2's <|endoftext|>. A byte-level vocabulary
// needs no training step, no vocabulary file and never meets an unknown
// character; the price is longer sequences than a BPE's (about 4x on
// English), which the small models tinyllama trains on text can afford.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tinyllama {

constexpr std::uint16_t kEndOfText = 256;
constexpr int kByteVocab = 257;  // the smallest --vocab-size for text

// The end-of-text token, then one token per byte of `text`.
std::vector<std::uint16_t> encode_document(std::string_view text);

// Back to text; the end-of-text token becomes "\n<|endoftext|>\n".
std::string decode_tokens(const std::vector<std::uint16_t>& tokens);

// The offset of the first byte that is not part of valid UTF-8, or npos.
std::size_t first_invalid_utf8(std::string_view text);

}  // namespace tinyllama
