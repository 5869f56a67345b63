#pragma once
// `tinyllama prepare`: tokenizes text into llm.c token shards (data/prepare.h).
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tinyllama::cli {

struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string val_fraction = "0.1";
  std::string shard_tokens = "100000000";
  std::string tokenizer;
  std::string doc_separator;
  bool whole_files = false;
};

class PrepareCommand {
 public:
  explicit PrepareCommand(CLI::App& app);  // registers the subcommand
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  PrepareArgs args_;
};

}  // namespace tinyllama::cli
