#include "prepare_command.h"

#include <iostream>

#include "core/errors.h"
#include "data/prepare.h"
#include "option_value.h"
#include "train/flag_values.h"

namespace tinyllama::cli {

PrepareCommand::PrepareCommand(CLI::App& app)
    : cmd_(app.add_subcommand("prepare",
                              "tokenize UTF-8 text into llm.c token shards for `train --data`")) {
  cmd_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd_->add_option("--input", args_.inputs,
                   "text files (one document each, byte-level tokens: 256 bytes + end-of-text "
                   "256 before each document) or token shards; paths or quoted globs")
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
  cmd_->footer(
      "Then: tinyllama train --data 'DIR/train_*.bin' --val-data DIR/val_000000.bin "
      "--eval-every N --vocab-size 257 ...");
}

int PrepareCommand::run() const {
  const PrepareResult r = prepare_shards(args_.inputs, args_.output_dir,
                                         parse_real_flag("--val-fraction", args_.val_fraction),
                                         parse_int_flag("--shard-tokens", args_.shard_tokens));
  for (const std::string& f : r.files) std::cout << "wrote " << f << "\n";
  std::cout << "prepare | " << r.train_tokens << " train tokens, " << r.val_tokens
            << " validation tokens; train with --vocab-size " << r.max_token + 1 << " or more\n";
  return 0;
}

}  // namespace tinyllama::cli
