#include "tokenizer_command.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "core/errors.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer_training.h"
#include "id_list.h"
#include "infer/codec_choice.h"
#include "io/file_bytes.h"
#include "option_value.h"
#include "stop_on_signal.h"
#include "train/flag_values.h"

namespace tinyllama::cli {
namespace {

// The progress of a long training on stderr: redrawn in place on a
// terminal, a line every ten seconds into a log.
void show_progress(const TokenizerTrainProgress& p) {
  static const bool terminal = ::isatty(STDERR_FILENO) != 0;
  static int last_logged = 0;
  char line[160];
  if (p.reading) {
    std::snprintf(line, sizeof line, "tokenizer | reading %.1f of %.1f MB, %lld lines | %.0f s",
                  static_cast<double>(p.bytes_read) / 1e6, static_cast<double>(p.bytes_total) / 1e6,
                  static_cast<long long>(p.sentences), p.seconds);
  } else {
    std::snprintf(line, sizeof line, "tokenizer | %lld lines read; learning the merges | %.0f s",
                  static_cast<long long>(p.sentences), p.seconds);
  }
  if (terminal) {
    std::cerr << "\r\033[K" << line << std::flush;
  } else if (static_cast<int>(p.seconds) / 10 > last_logged) {
    last_logged = static_cast<int>(p.seconds) / 10;
    std::cerr << line << std::endl;
  }
}

}  // namespace

TokenizerCommand::TokenizerCommand(CLI::App& app)
    : cmd_(app.add_subcommand("tokenizer",
                              "train a SentencePiece BPE tokenizer (Llama 2's settings: byte "
                              "fallback, split digits) and look at its ids")) {
  TokenizerArgs& a = args_;
  cmd_->require_subcommand(1);
  train_ = cmd_->add_subcommand(
      "train",
      "train a BPE model with byte fallback on text files: <unk> 0, <s> (BOS) 1, </s> (EOS) 2, "
      "<pad> 3, then the 256 byte pieces");
  train_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  train_
      ->add_option("--input", a.inputs, "text files (each line a sentence); paths or quoted globs")
      ->type_name("PATH")
      ->expected(1, -1)
      ->required();
  value(train_, "--output", a.output, "FILE", "the model file (e.g. tokenizer.model)")->required();
  value(train_, "--vocab-size", a.vocab_size, "INT",
        "pieces in the vocabulary, special ones included");
  value(train_, "--max-sentences", a.max_sentences, "INT",
        "lines sampled from a larger corpus for training (0: all)");
  value(train_, "--seed", a.seed, "UINT", "seeds the sampling of lines");
  train_->footer("Then: tinyllama prepare --tokenizer FILE --input ... --output-dir DIR");

  encode_ = cmd_->add_subcommand("encode", "print a text's ids, comma-separated (no BOS/EOS)");
  encode_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  value(encode_, "--model", a.model, "FILE", "a SentencePiece .model")->required();
  value(encode_, "--text", a.text, "TEXT", "the text");
  value(encode_, "--input", a.input, "FILE", "a file whose whole content is the text instead");

  decode_ = cmd_->add_subcommand("decode", "print the text of comma-separated ids");
  decode_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  value(decode_, "--model", a.model, "FILE", "a SentencePiece .model or llm.c's gpt2_tokenizer.bin")
      ->required();
  value(decode_, "--ids", a.ids, "IDS", "comma-separated ids")->required();
}

int TokenizerCommand::run() const {
  if (train_->parsed()) return train();
  if (encode_->parsed()) return encode();
  return decode();
}

int TokenizerCommand::train() const {
  TokenizerTrainOptions o;
  o.inputs = args_.inputs;
  o.output = args_.output;
  o.vocab_size = parse_int_flag("--vocab-size", args_.vocab_size);
  o.max_sentences = parse_int_flag("--max-sentences", args_.max_sentences);
  o.seed = parse_uint64_flag("--seed", args_.seed);
  const StopOnSignal stop_on_signal;
  train_bpe_tokenizer(o, show_progress);
  if (::isatty(STDERR_FILENO)) std::cerr << "\r\033[K" << std::flush;
  const SentencePieceTokenizer t = SentencePieceTokenizer::load("--output", o.output);
  const SpecialIds ids = t.special_ids();
  std::cout << "wrote " << t.describe() << "\n"
            << "tokenizer | BPE with byte fallback | unk " << ids.unk << ", bos " << ids.bos
            << ", eos " << ids.eos << ", pad " << ids.pad << "\n";
  return 0;
}

int TokenizerCommand::encode() const {
  if (args_.text.empty() == args_.input.empty()) {
    throw UsageError("--text/--input: give exactly one of them");
  }
  const SentencePieceTokenizer t = SentencePieceTokenizer::load("--model", args_.model);
  const std::string text =
      args_.input.empty() ? args_.text : read_file_bytes("--input", args_.input);
  std::cout << id_list_text(t.encode(text)) << "\n";
  return 0;
}

int TokenizerCommand::decode() const {
  const std::vector<std::int32_t> ids = parse_id_list("--ids", args_.ids);
  std::cout << load_tokenizer_file("--model", args_.model)->decode(ids) << "\n";
  return 0;
}

}  // namespace tinyllama::cli
