// The SentencePiece wrapper and the trainer: Llama 2's special ids and
// byte fallback, text that decodes to itself, the parallel encoding equal
// to the serial one, and one-line refusals of files that are not models.
#include "data/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "data/tokenizer_training.h"
#include "tiny_tokenizer.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

std::string usage_error(const std::string& path) {
  try {
    SentencePieceTokenizer::load("--tokenizer", path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

fs::path scratch(const std::string& name, const std::string& bytes) {
  const fs::path p = fs::temp_directory_path() / ("tl_sp_" + std::to_string(::getpid()) + name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

TEST(SentencePieceTokenizer, TrainsLlama2sLayoutOfSpecialAndBytePieces) {
  const SentencePieceTokenizer t = SentencePieceTokenizer::load("", testing::tiny_tokenizer());
  EXPECT_EQ(t.vocab_size(), 400);
  const SpecialIds ids = t.special_ids();
  EXPECT_EQ(ids.unk, kTokenizerUnkId);
  EXPECT_EQ(ids.bos, kTokenizerBosId);
  EXPECT_EQ(ids.eos, kTokenizerEosId);
  EXPECT_EQ(ids.pad, kTokenizerPadId);
  EXPECT_EQ(t.piece(1), "<s>");
  EXPECT_EQ(t.piece(2), "</s>");
  EXPECT_EQ(t.piece(4), "<0x00>");
  EXPECT_EQ(t.piece(4 + 0x41), "<0x41>");
  // Digits are split one by one.
  const std::vector<std::int32_t> digits = t.encode("2718");
  EXPECT_EQ(t.decode(digits), "2718");
  EXPECT_GE(digits.size(), 4u);
}

TEST(SentencePieceTokenizer, DecodesWhatItEncodedExactlyAndBytesFallBack) {
  const SentencePieceTokenizer t = SentencePieceTokenizer::load("", testing::tiny_tokenizer());
  for (const std::string text :
       {"The quick brown fox", "  two  leading spaces and\ttabs\n\nnew lines",
        "unseen ÿ and 🦙 and 日本", "def f(x):\n    return x**2"}) {
    const std::vector<std::int32_t> ids = t.encode(text);
    EXPECT_EQ(t.decode(ids), text);
    for (const std::int32_t id : ids) EXPECT_NE(id, kTokenizerUnkId) << text;
  }
  // Invalid UTF-8: SentencePiece reads every bad byte as U+FFFD.
  EXPECT_EQ(t.decode(t.encode("a\xff"
                              "b")),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(t.decode({1, -5, 2, 400}), "<-5><400>");
}

TEST(SentencePieceTokenizer, EncodingOnEveryCoreEqualsOneByOne) {
  const SentencePieceTokenizer t = SentencePieceTokenizer::load("", testing::tiny_tokenizer());
  const std::string corpus = testing::tiny_corpus_text();
  std::vector<std::string_view> docs;
  for (std::size_t at = 0; at < corpus.size(); at += 97) {
    docs.push_back(std::string_view(corpus).substr(at, 97));
  }
  const auto all = t.encode_all(docs, 3);
  ASSERT_EQ(all.size(), docs.size());
  for (std::size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(all[i], t.encode(docs[i])) << i;
}

TEST(SentencePieceTokenizer, RefusesFilesThatAreNotModelsNamingTheFile) {
  const std::string model = testing::tiny_tokenizer();
  std::ifstream in(model, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path truncated = scratch("trunc.model", bytes.substr(0, bytes.size() / 2));
  const fs::path empty = scratch("empty.model", "");
  const fs::path text = scratch("text.model", "just some text\n");
  std::string gpt2(1024, '\0');
  const std::uint32_t magic = 20240328;
  std::memcpy(gpt2.data(), &magic, sizeof magic);
  const fs::path gpt2_file = scratch("gpt2.bin", gpt2);

  EXPECT_EQ(usage_error("/nonexistent/t.model"), "--tokenizer /nonexistent/t.model: no such file");
  EXPECT_NE(
      usage_error(truncated.string()).find(truncated.string() + ": not a SentencePiece model"),
      std::string::npos);
  EXPECT_NE(usage_error(empty.string()).find("empty file"), std::string::npos);
  EXPECT_NE(usage_error(text.string()).find("not a SentencePiece model"), std::string::npos);
  EXPECT_NE(usage_error(gpt2_file.string()).find("gpt2_tokenizer.bin, which only decodes"),
            std::string::npos);
  EXPECT_NE(usage_error(fs::temp_directory_path().string()).find("is a directory"),
            std::string::npos);
  for (const fs::path& p : {truncated, empty, text, gpt2_file}) fs::remove(p);
}

TEST(TokenizerTraining, RefusesBadSizesAndEmptyInputNamingTheFlag) {
  const fs::path corpus = scratch("corpus.txt", testing::tiny_corpus_text());
  const fs::path out = fs::temp_directory_path() / ("tl_sp_out_" + std::to_string(::getpid()));
  TokenizerTrainOptions o;
  o.inputs = {corpus.string()};
  o.output = out.string();
  o.vocab_size = 100;
  EXPECT_THROW(train_bpe_tokenizer(o, nullptr), UsageError);
  o.vocab_size = 200000;  // more pieces than the corpus has
  try {
    train_bpe_tokenizer(o, nullptr);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--vocab-size 200000: "), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));  // nothing written half
  o.vocab_size = 300;
  o.inputs = {"/nonexistent/*.txt"};
  EXPECT_THROW(train_bpe_tokenizer(o, nullptr), UsageError);
  fs::remove(corpus);
}

}  // namespace
}  // namespace tinyllama
