#include "data/gpt2_tokenizer.h"

#include <cstring>

#include "core/errors.h"
#include "io/file_bytes.h"

namespace tinyllama {
namespace {

constexpr std::uint32_t kMaxVocab = 1u << 24;
constexpr std::uint32_t kGpt2EndOfText = 50256;  // version 1 files: GPT-2's

std::uint32_t header_field(const std::uint8_t* data, int i) {
  std::uint32_t v = 0;
  std::memcpy(&v, data + 4 * i, 4);
  return v;
}

}  // namespace

std::string Gpt2Tokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string out;
  for (const std::int32_t id : ids) {
    out += id >= 0 && id < vocab_size() ? pieces[static_cast<std::size_t>(id)]
                                        : "<" + std::to_string(id) + ">";
  }
  return out;
}

bool looks_like_gpt2_tokenizer(const std::uint8_t* data, std::size_t size) {
  return size >= 4 && header_field(data, 0) == kGpt2TokenizerMagic;
}

Gpt2Tokenizer parse_gpt2_tokenizer(const std::string& name, const std::uint8_t* data,
                                   std::size_t size) {
  auto fail = [&](const std::string& problem) -> void { throw UsageError(name + ": " + problem); };
  if (size < kGpt2TokenizerHeaderBytes) {
    fail("too short (" + std::to_string(size) + " bytes) for the " +
         std::to_string(kGpt2TokenizerHeaderBytes) + "-byte gpt2_tokenizer.bin header");
  }
  if (header_field(data, 0) != kGpt2TokenizerMagic) {
    fail("not an llm.c gpt2_tokenizer.bin (magic " + std::to_string(header_field(data, 0)) +
         ", expected " + std::to_string(kGpt2TokenizerMagic) + ")");
  }
  const std::uint32_t version = header_field(data, 1);
  if (version != 1 && version != 2) {
    fail("gpt2_tokenizer.bin version " + std::to_string(version) + " (this reader knows 1 and 2)");
  }
  const std::uint32_t vocab = header_field(data, 2);
  if (vocab < 1 || vocab > kMaxVocab) {
    fail("vocabulary size " + std::to_string(vocab) + " is outside [1, " +
         std::to_string(kMaxVocab) + "]");
  }
  const std::uint32_t eot = version == 1 ? kGpt2EndOfText : header_field(data, 3);
  if (eot >= vocab) {
    fail("end-of-text id " + std::to_string(eot) + " is outside the vocabulary of " +
         std::to_string(vocab));
  }
  Gpt2Tokenizer t;
  t.end_of_text = static_cast<int>(eot);
  t.pieces.reserve(vocab);
  std::size_t at = kGpt2TokenizerHeaderBytes;
  for (std::uint32_t id = 0; id < vocab; ++id) {
    if (at >= size) {
      fail("truncated: ends at id " + std::to_string(id) + " of " + std::to_string(vocab));
    }
    const std::size_t length = data[at++];
    if (length == 0) fail("id " + std::to_string(id) + " has an empty entry");
    if (length > size - at) {
      fail("truncated: id " + std::to_string(id) + "'s " + std::to_string(length) +
           " bytes run past the end of the file");
    }
    t.pieces.emplace_back(reinterpret_cast<const char*>(data + at), length);
    at += length;
  }
  if (at != size) {
    fail(std::to_string(size - at) + " bytes after the last of the " + std::to_string(vocab) +
         " entries");
  }
  return t;
}

Gpt2Tokenizer read_gpt2_tokenizer(const std::string& flag, const std::string& path) {
  const std::string bytes = read_file_bytes(flag, path);
  return parse_gpt2_tokenizer(flag.empty() ? path : flag + " " + path,
                              reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace tinyllama
