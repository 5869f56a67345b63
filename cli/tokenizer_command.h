#pragma once
// `tinyllama tokenizer train|encode|decode`: a SentencePiece BPE tokenizer
// trained on text (data/tokenizer_training.h), and a model's ids for a text
// and text for ids, to look at what `prepare --tokenizer` writes.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tinyllama::cli {

struct TokenizerArgs {
  std::vector<std::string> inputs;  // train
  std::string output;               // train
  std::string vocab_size = "8000";  // train
  std::string max_sentences = "2000000";
  std::string seed = "1234";
  std::string model;  // encode, decode
  std::string text;   // encode
  std::string input;  // encode: a file's whole text
  std::string ids;    // decode
};

class TokenizerCommand {
 public:
  explicit TokenizerCommand(CLI::App& app);  // registers the subcommand
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  int train() const;
  int encode() const;
  int decode() const;

  CLI::App* cmd_;
  CLI::App* train_;
  CLI::App* encode_;
  CLI::App* decode_;
  TokenizerArgs args_;
};

}  // namespace tinyllama::cli
