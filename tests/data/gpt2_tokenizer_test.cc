// The reader of llm.c's gpt2_tokenizer.bin on files built here: both
// versions, decoding (multi-byte characters split across ids included), and
// one-line refusals of every way the file can be wrong.
#include "data/gpt2_tokenizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/errors.h"

namespace tinyllama {
namespace {

std::vector<std::uint8_t> tokenizer_file(std::uint32_t version,
                                         const std::vector<std::string>& pieces, std::uint32_t eot,
                                         std::uint32_t magic = 20240328) {
  std::vector<std::uint32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<std::uint32_t>(pieces.size());
  header[3] = eot;
  std::vector<std::uint8_t> out(kGpt2TokenizerHeaderBytes);
  std::memcpy(out.data(), header.data(), kGpt2TokenizerHeaderBytes);
  for (const std::string& p : pieces) {
    out.push_back(static_cast<std::uint8_t>(p.size()));
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

std::string error_of(const std::vector<std::uint8_t>& bytes) {
  try {
    parse_gpt2_tokenizer("gpt2_tokenizer.bin", bytes.data(), bytes.size());
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// "é" is two bytes; GPT-2's byte-level BPE may split it over two ids.
const std::vector<std::string> kPieces = {"Hello", ",", " world", "\xC3", "\xA9", "<|endoftext|>"};

TEST(Gpt2Tokenizer, ReadsVersion2AndDecodesIdsToTheirBytes) {
  const std::vector<std::uint8_t> file = tokenizer_file(2, kPieces, 5);
  ASSERT_TRUE(looks_like_gpt2_tokenizer(file.data(), file.size()));
  const Gpt2Tokenizer t = parse_gpt2_tokenizer("t", file.data(), file.size());
  EXPECT_EQ(t.vocab_size(), 6);
  EXPECT_EQ(t.end_of_text, 5);
  EXPECT_EQ(t.pieces, kPieces);
  EXPECT_EQ(t.decode({0, 1, 2, 3, 4, 5}), "Hello, world\xC3\xA9<|endoftext|>");
  EXPECT_EQ(t.decode({2, 6, -1}), " world<6><-1>");
}

TEST(Gpt2Tokenizer, Version1MeansGpt2sEndOfText50256) {
  std::vector<std::string> pieces(50257);
  for (std::size_t i = 0; i < pieces.size(); ++i) pieces[i] = std::string(1, char('a' + i % 26));
  pieces[50256] = "<|endoftext|>";
  const std::vector<std::uint8_t> file = tokenizer_file(1, pieces, 0);
  const Gpt2Tokenizer t = parse_gpt2_tokenizer("t", file.data(), file.size());
  EXPECT_EQ(t.end_of_text, 50256);
  EXPECT_EQ(t.decode({50256, 0, 25}), "<|endoftext|>az");
  // A version 1 file too small for GPT-2's end-of-text id is refused.
  const std::vector<std::uint8_t> small = tokenizer_file(1, kPieces, 0);
  EXPECT_NE(error_of(small).find("end-of-text id 50256 is outside the vocabulary of 6"),
            std::string::npos);
}

TEST(Gpt2Tokenizer, RefusesBrokenFilesNamingTheFileAndTheFault) {
  const std::vector<std::uint8_t> good = tokenizer_file(2, kPieces, 5);
  std::vector<std::uint8_t> truncated(good.begin(), good.end() - 3);
  std::vector<std::uint8_t> trailing = good;
  trailing.push_back(0);
  std::vector<std::uint8_t> empty_entry = tokenizer_file(2, {"a", "", "b"}, 0);
  std::vector<std::uint8_t> header_only(good.begin(), good.begin() + 1024);
  const std::pair<std::vector<std::uint8_t>, std::string> cases[] = {
      {{1, 2, 3}, "gpt2_tokenizer.bin: too short (3 bytes)"},
      {tokenizer_file(2, kPieces, 5, 20240520), "not an llm.c gpt2_tokenizer.bin (magic 20240520"},
      {tokenizer_file(3, kPieces, 5), "version 3 (this reader knows 1 and 2)"},
      {tokenizer_file(2, kPieces, 6), "end-of-text id 6 is outside the vocabulary of 6"},
      {tokenizer_file(2, {}, 0), "vocabulary size 0 is outside"},
      {truncated, "truncated: id 5's 13 bytes run past the end"},
      {header_only, "truncated: ends at id 0 of 6"},
      {trailing, "1 bytes after the last of the 6 entries"},
      {empty_entry, "id 1 has an empty entry"},
  };
  for (const auto& [bytes, message] : cases) {
    EXPECT_NE(error_of(bytes).find(message), std::string::npos)
        << message << " | got: " << error_of(bytes);
  }
}

}  // namespace
}  // namespace tinyllama
