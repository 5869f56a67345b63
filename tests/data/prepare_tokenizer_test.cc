// prepare --tokenizer (data/prepare.h) and the run's tokenizer
// (data/run_tokenizer.h): documents as BOS, ids, EOS in shards that record
// the tokenizer beside a copy of it, and the refusals of mixed tokenizers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "data/prepare.h"
#include "data/run_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/token_dataset.h"
#include "data/token_shard.h"
#include "tiny_tokenizer.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

class PrepareWithTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tl_prep_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "a.txt") << "One document.\n%\nDigits 42 and 東京.\n";
    std::ofstream(dir_ / "b.txt") << "Third\ndocument.\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  PrepareOptions options(const std::string& out) const {
    PrepareOptions o;
    o.inputs = {(dir_ / "*.txt").string()};
    o.out_dir = (dir_ / out).string();
    o.val_fraction = 0;
    o.tokenizer = testing::tiny_tokenizer();
    o.doc_separator = "%";
    return o;
  }
  fs::path dir_;
};

TEST_F(PrepareWithTokenizer, WritesBosIdsEosPerDocumentAndRecordsTheTokenizer) {
  const PrepareResult r = prepare_shards(options("shards"));
  const SentencePieceTokenizer t = SentencePieceTokenizer::load("", testing::tiny_tokenizer());
  std::vector<std::uint32_t> expected;
  for (const std::string doc : {"One document.", "Digits 42 and 東京.", "Third\ndocument."}) {
    expected.push_back(1);
    for (const std::int32_t id : t.encode(doc)) expected.push_back(static_cast<std::uint32_t>(id));
    expected.push_back(2);
  }
  EXPECT_EQ(r.documents, 3);
  ASSERT_EQ(r.files.size(), 2u);  // tokenizer.model, train_000000.bin
  EXPECT_EQ(fs::path(r.files[0]).filename(), "tokenizer.model");
  const TokenShard shard = read_token_shard(r.files[1]);
  EXPECT_EQ(shard.tokens, expected);
  EXPECT_FALSE(shard.wide);
  EXPECT_EQ(shard.tokenizer, (ShardTokenizer{t.vocab_size(), t.fingerprint()}));
  EXPECT_EQ(SentencePieceTokenizer::load("", r.files[0]).fingerprint(), t.fingerprint());

  // The run finds the tokenizer beside its shards, with its special ids.
  const std::optional<HfTokenizer> run =
      run_tokenizer({(dir_ / "shards" / "train_*.bin").string()}, "", 400);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->fingerprint, t.fingerprint());
  EXPECT_EQ(run->model_bytes, t.model_bytes());
  EXPECT_EQ(run->bos_piece, "<s>");
  EXPECT_EQ(run->eos_id, 2);
  EXPECT_EQ(load_token_dataset("--data", {r.files[1]}).tokenizer(), shard.tokenizer);
}

TEST_F(PrepareWithTokenizer, RefusesAModelVocabularySmallerThanTheTokenizers) {
  prepare_shards(options("shards"));
  try {
    run_tokenizer({(dir_ / "shards" / "train_*.bin").string()}, "", 300);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--vocab-size 300: the tokenizer of --data "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("has 400 ids"), std::string::npos) << e.what();
  }
}

TEST_F(PrepareWithTokenizer, RefusesShardsOfAnotherTokenizerAndMixedData) {
  PrepareOptions other = options("other");
  other.tokenizer = testing::tiny_tokenizer(350);
  const PrepareResult made_by_other = prepare_shards(other);
  PrepareOptions o = options("mixed");
  o.inputs = {made_by_other.files[1]};
  try {
    prepare_shards(o);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--input " + made_by_other.files[1] +
                                         ": made by another tokenizer"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "mixed" / "train_000000.bin"));
  const PrepareResult mine = prepare_shards(options("mine"));
  EXPECT_THROW(load_token_dataset("--data", {mine.files[1], made_by_other.files[1]}), UsageError);
  // The shards record one tokenizer, --init-from names another.
  fs::create_directories(dir_ / "hf");
  fs::copy_file(made_by_other.files[0], dir_ / "hf" / "tokenizer.model");
  EXPECT_THROW(run_tokenizer({mine.files[1]}, (dir_ / "hf").string(), 400), UsageError);
  // --init-from's tokenizer alone is the run's; byte-level --data is not its.
  const std::optional<HfTokenizer> from_dir = run_tokenizer({}, (dir_ / "hf").string(), 400);
  ASSERT_TRUE(from_dir.has_value());
  EXPECT_EQ(from_dir->vocab_size, 350);
  EXPECT_FALSE(from_dir->model_bytes.empty());
  EXPECT_THROW(run_tokenizer({(dir_ / "a.txt").string()}, (dir_ / "hf").string(), 400), UsageError);
  // A tokenizer.model beside the shards that is not the one they record.
  fs::copy_file(made_by_other.files[0], dir_ / "mine" / "tokenizer.model",
                fs::copy_options::overwrite_existing);
  EXPECT_THROW(run_tokenizer({mine.files[1]}, "", 400), UsageError);
}

TEST_F(PrepareWithTokenizer, KeepsInvalidUtf8AsSentencePieceDoesWithANote) {
  std::ofstream(dir_ / "c.txt", std::ios::binary) << "bad \xff byte";
  PrepareOptions o = options("bad");
  o.inputs = {(dir_ / "c.txt").string()};
  const PrepareResult r = prepare_shards(o);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("not UTF-8 at byte offset 4"), std::string::npos) << r.notes[0];
  const SentencePieceTokenizer t = SentencePieceTokenizer::load("", testing::tiny_tokenizer());
  std::vector<std::int32_t> ids;
  for (const std::uint32_t id : read_token_shard(r.files[1]).tokens)
    ids.push_back(static_cast<std::int32_t>(id));
  EXPECT_EQ(t.decode(ids), "bad \xEF\xBF\xBD byte");
}

}  // namespace
}  // namespace tinyllama
