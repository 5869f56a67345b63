#include "prepare_command.h"

#include <chrono>
#include <iomanip>
#include <iostream>

#include "core/errors.h"
#include "core/fingerprint.h"
#include "data/prepare.h"
#include "option_value.h"
#include "stop_on_signal.h"
#include "train/flag_values.h"

namespace tinyllama::cli {

PrepareCommand::PrepareCommand(CLI::App& app)
    : cmd_(app.add_subcommand("prepare",
                              "tokenize UTF-8 text into llm.c token shards for `train --data`")) {
  cmd_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd_->add_option("--input", args_.inputs,
                   "text files or token shards; paths or quoted globs. Without --tokenizer a file "
                   "is one document of byte-level tokens (end-of-text 256, then its bytes)")
      ->type_name("PATH")
      ->expected(1, -1)
      ->required();
  value(cmd_, "--output-dir", args_.output_dir, "DIR",
        "where the shards go (created if missing; must hold no shards yet): val_000000.bin "
        "and train_000000.bin, train_000001.bin, ...")
      ->required();
  value(cmd_, "--val-fraction", args_.val_fraction, "FLOAT",
        "share of the tokens (the tail) written to val_000000.bin, in [0, 1)");
  value(cmd_, "--shard-tokens", args_.shard_tokens, "INT", "the most tokens in one train shard");
  value(cmd_, "--tokenizer", args_.tokenizer, "FILE",
        "a SentencePiece model (tinyllama tokenizer train): each document becomes BOS, its ids, "
        "EOS, encoded on every core; the shards record it and DIR/tokenizer.model is a copy");
  value(cmd_, "--doc-separator", args_.doc_separator, "LINE",
        "with --tokenizer: the line that ends a document (default: an empty line, so "
        "paragraphs are documents; '%' for fortune files)");
  cmd_->add_flag("--whole-files", args_.whole_files,
                 "with --tokenizer: each file is one document (slower: a document is encoded on "
                 "one core)");
  cmd_->footer(
      "Then: tinyllama train --data 'DIR/train_*.bin' --val-data DIR/val_000000.bin "
      "--eval-every N --vocab-size V ... (V: the tokenizer's vocabulary, 257 for bytes)");
}

int PrepareCommand::run() const {
  const PrepareArgs& a = args_;
  if (a.tokenizer.empty() && (a.whole_files || cmd_->count("--doc-separator") > 0)) {
    throw UsageError(std::string(a.whole_files ? "--whole-files" : "--doc-separator") +
                     ": only with --tokenizer (byte-level text is one document per file)");
  }
  PrepareOptions o;
  o.inputs = a.inputs;
  o.out_dir = a.output_dir;
  o.val_fraction = parse_real_flag("--val-fraction", a.val_fraction);
  o.shard_tokens = parse_int_flag("--shard-tokens", a.shard_tokens);
  o.tokenizer = a.tokenizer;
  if (a.whole_files) {
    o.doc_separator.reset();
  } else {
    o.doc_separator = a.doc_separator;
  }
  const StopOnSignal stop_on_signal;
  const auto t0 = std::chrono::steady_clock::now();
  const PrepareResult r = prepare_shards(o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& note : r.notes) std::cerr << "note: " << note << "\n";
  for (const std::string& f : r.files) std::cout << "wrote " << f << "\n";
  std::cout << "prepare | " << r.train_tokens << " train tokens, " << r.val_tokens
            << " validation tokens";
  if (!o.tokenizer.empty()) {
    std::cout << " | " << r.documents << " documents, " << r.text_bytes << " bytes of text in "
              << std::fixed << std::setprecision(2) << seconds << " s | tokenizer vocabulary "
              << r.tokenizer.vocab_size << ", fingerprint "
              << fingerprint_hex(r.tokenizer.fingerprint) << "; train with --vocab-size "
              << r.tokenizer.vocab_size << " or more\n";
  } else {
    std::cout << "; train with --vocab-size " << r.max_token + 1 << " or more\n";
  }
  return 0;
}

}  // namespace tinyllama::cli
