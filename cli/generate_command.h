#pragma once
// `tinyllama generate`: text (or token ids) continued by a trained model,
// decoded incrementally with a KV cache on the CPU (src/infer) or the GPU
// (src/cuda/cuda_decoder, src/ops/decode), with the prefill and decode speeds.
#include <CLI/CLI.hpp>
#include <string>

#include "infer/decode_setup.h"

namespace tinyllama::cli {

// Every value as typed; converted and checked after parsing.
struct GenerateArgs {
  std::string weights;
  std::string prompt;
  std::string prompt_ids;
  std::string tokenizer;
  std::string max_new_tokens = "64";
  std::string temperature = "1.0";
  std::string top_k = "0";
  std::string top_p = "1.0";
  std::string seed = "1234";
  DecodeFlags decode;  // --device, --dtype, --gemv, --no-graph
  bool print_ids = false;
};

class GenerateCommand {
 public:
  explicit GenerateCommand(CLI::App& app);  // registers the subcommand
  bool selected() const { return cmd_->parsed(); }
  int run() const;  // throws UsageError / RuntimeFailure

 private:
  CLI::App* cmd_;
  GenerateArgs args_;
};

}  // namespace tinyllama::cli
