// The tokenizer from text to generated text through the binary, as the
// walkthrough in docs/TOKENIZER.md runs it (tiny sizes): tokenizer train,
// prepare --tokenizer, train --data --export-hf, generate with the
// tokenizer found beside the weights and named by --tokenizer; and the
// one-line refusals (exit 2) of bad tokenizer files and mismatches.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

std::string corpus_text() {
  std::string text;
  for (int i = 0; i < 60; ++i) {
    text += "The cat sat on mat number " + std::to_string(i) + ".\nIt was a sunny day.\n%\n";
    text += "def square(x):\n    return x * x  # " + std::to_string(i) + "\n%\n";
    text += "東京 and 🚀 are here too.\n%\n";
  }
  return text;
}

class TokenizerRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(scratch_dir("tokenizer"));
    std::ofstream(*dir_ / "corpus.txt") << corpus_text();
    RunResult r = run_tinyllama("tokenizer train --input " + path("corpus.txt") + " --output " +
                                path("tok.model") + " --vocab-size 320");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_tinyllama("prepare --tokenizer " + path("tok.model") + " --input " +
                      path("corpus.txt") + " --doc-separator % --val-fraction 0 --output-dir " +
                      path("shards"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_tinyllama("train --device cpu --data " + path("shards/train_000000.bin") +
                      " --vocab-size 320 --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 32 "
                      "--batch-size 4 --num-steps 4 --warmup-steps 0 --export-hf " +
                      path("hf"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    train_out_ = new std::string(r.out);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete train_out_;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }
  static inline fs::path* dir_ = nullptr;
  static inline std::string* train_out_ = nullptr;
};

TEST_F(TokenizerRun, ShardsTrainAndExportCarryTheTokenizer) {
  EXPECT_NE(train_out_->find("data | --data 1 file, "), std::string::npos) << *train_out_;
  EXPECT_NE(train_out_->find("tokenizer vocabulary 320, fingerprint "), std::string::npos)
      << *train_out_;
  for (const char* f : {"tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"}) {
    EXPECT_TRUE(fs::exists(*dir_ / "hf" / f)) << f;
  }
  EXPECT_EQ(read_text(*dir_ / "hf" / "tokenizer.model"), read_text(*dir_ / "tok.model"));
  const std::string config = read_text(*dir_ / "hf" / "config.json");
  EXPECT_NE(config.find("\"bos_token_id\": 1"), std::string::npos) << config;
  EXPECT_NE(config.find("\"eos_token_id\": 2"), std::string::npos) << config;
}

TEST_F(TokenizerRun, GeneratesTextWithTheTokenizerBesideTheWeightsOrNamed) {
  const std::string greedy = " --prompt 'The cat' --max-new-tokens 12 --temperature 0 --print-ids";
  const RunResult beside = run_tinyllama("generate --weights " + path("hf") + greedy);
  ASSERT_EQ(beside.exit_code, 0) << beside.err;
  EXPECT_EQ(beside.out.rfind("The cat", 0), 0u) << beside.out;
  EXPECT_EQ(beside.out.find('<'), std::string::npos) << "ids printed as numbers: " << beside.out;
  const RunResult named = run_tinyllama("generate --weights " + path("hf") + " --tokenizer " +
                                        path("tok.model") + greedy);
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(named.out, beside.out);
  const RunResult ids =
      run_tinyllama("tokenizer encode --model " + path("tok.model") + " --text 'The cat'");
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  const RunResult text = run_tinyllama("tokenizer decode --model " + path("tok.model") + " --ids " +
                                       ids.out.substr(0, ids.out.size() - 1));
  EXPECT_EQ(text.out, "The cat\n");
}

TEST_F(TokenizerRun, BadTokenizerInputIsOneLineNamingTheFileExit2) {
  std::ofstream(*dir_ / "half.model", std::ios::binary)
      << read_text(*dir_ / "tok.model").substr(0, 200);
  RunResult other = run_tinyllama("tokenizer train --input " + path("corpus.txt") + " --output " +
                                  path("other.model") + " --vocab-size 400");
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const std::string gen = "generate --weights " + path("hf") + " --prompt x --tokenizer ";
  const std::pair<std::string, std::string> cases[] = {
      {gen + path("missing.model"), path("missing.model") + ": no such file"},
      {gen + path("half.model"), path("half.model") + ": not a SentencePiece model"},
      {gen + path("corpus.txt"), path("corpus.txt") + ": not a SentencePiece model"},
      {gen + path("other.model"), path("other.model") + ": has 400 ids, more than the model's"},
      {"prepare --tokenizer " + path("half.model") + " --input " + path("corpus.txt") +
           " --output-dir " + path("never"),
       "--tokenizer " + path("half.model") + ": not a SentencePiece model"},
      {"prepare --tokenizer " + path("other.model") + " --input " +
           path("shards/train_000000.bin") + " --output-dir " + path("never"),
       path("shards/train_000000.bin") + ": made by another tokenizer"},
      {"train --device cpu --data " + path("shards/train_000000.bin") +
           " --vocab-size 300 --hidden-dim 32 --num-layers 1 --num-heads 4 --seq-len 8 "
           "--num-steps 1",
       "--vocab-size 300: --data holds token"},
      {"tokenizer train --input " + path("corpus.txt") + " --output " + path("never.model") +
           " --vocab-size 90000",
       "--vocab-size 90000: Vocabulary size too high (90000)"},
      {"prepare --input " + path("corpus.txt") + " --whole-files --output-dir " + path("never"),
       "--whole-files: only with --tokenizer"},
      {"tokenizer train --input " + path("corpus.txt") + " --output " + path("never.model") +
           " --max-sentences 50",
       "--max-sentences 50: must be 0 (every line) or more than 100"},
  };
  for (const auto& [args, message] : cases) {
    const RunResult r = run_tinyllama(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(fs::exists(*dir_ / "never"));
  EXPECT_FALSE(fs::exists(*dir_ / "never.model"));
}

TEST_F(TokenizerRun, AnotherTokenizersModelIsRefusedByGenerate) {
  // A model trained on tok.model's shards, its tokenizer files removed: the
  // record in config.json still names the tokenizer.
  fs::create_directories(*dir_ / "bare");
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy_file(*dir_ / "hf" / f, *dir_ / "bare" / f, fs::copy_options::overwrite_existing);
  }
  const RunResult none = run_tinyllama("generate --weights " + path("bare") + " --prompt x");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("which is not beside it; give it with --tokenizer"), std::string::npos)
      << none.err;
  RunResult r = run_tinyllama("tokenizer train --input " + path("corpus.txt") + " --output " +
                              path("same_size.model") +
                              " --vocab-size 320 --seed 9 "
                              "--max-sentences 150");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_tinyllama("generate --weights " + path("bare") + " --prompt x --tokenizer " +
                    path("same_size.model"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not the tokenizer " + path("bare") + " was trained with"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tinyllama::testing
