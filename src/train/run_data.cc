#include "train/run_data.h"

#include "core/errors.h"
#include "train/synthetic_data.h"

namespace tinyllama {
namespace {

void check_vocab(const std::string& flag, const TokenDataset& data, int vocab) {
  const int max = data.max_token();
  if (max >= vocab) {
    throw UsageError("--vocab-size " + std::to_string(vocab) + ": " + flag + " holds token " +
                     std::to_string(max) + "; needs --vocab-size " + std::to_string(max + 1) +
                     " or more (text needs 257: 256 bytes and end-of-text)");
  }
}

}  // namespace

RunData::RunData(const TrainOptions& opts) : seq_(opts.shape.seq) {
  if (opts.data.empty()) {
    train_ = std::make_unique<SyntheticData>(opts.model.vocab_size, opts.shape.seq,
                                             opts.data_pool_rows, opts.data_order_seed());
    description_ = "synthetic tokens (" + std::to_string(opts.data_pool_rows) + "-row pool)";
    return;
  }
  TokenDataset all = load_token_dataset("--data", opts.data);
  check_vocab("--data", all, opts.model.vocab_size);
  const bool eval = opts.eval_every > 0;
  if (eval && !opts.val_data.empty()) {
    val_tokens_ = std::make_unique<TokenDataset>(load_token_dataset("--val-data", opts.val_data));
    check_vocab("--val-data", *val_tokens_, opts.model.vocab_size);
    train_tokens_ = std::make_unique<TokenDataset>(std::move(all));
  } else if (eval) {
    auto [keep, held] = split_tail(all, opts.val_fraction);
    train_tokens_ = std::make_unique<TokenDataset>(std::move(keep));
    val_tokens_ = std::make_unique<TokenDataset>(std::move(held));
  } else {
    train_tokens_ = std::make_unique<TokenDataset>(std::move(all));
  }
  train_ = std::make_unique<BatchSampler>(*train_tokens_, opts.shape.seq, opts.data_order_seed(),
                                          /*shuffle=*/true, "--data");
  description_ = "--data " + train_tokens_->description();
  if (val_tokens_) {
    // Built once here so that data too short for one row fails before training.
    const BatchSampler check(*val_tokens_, opts.shape.seq, opts.data_order_seed(), false,
                             opts.val_data.empty() ? "--val-fraction" : "--val-data");
    description_ += ", held out " + val_tokens_->description();
  }
}

double RunData::evaluate(Model& model, int batches, int batch_size) const {
  BatchSampler val(*val_tokens_, seq_, 0, /*shuffle=*/false, "--val-data");
  double sum = 0;
  for (int i = 0; i < batches; ++i) {
    model.set_batch(val.next_batch(batch_size));
    model.evaluate();
    sum += model.loss();
  }
  return sum / batches;
}

}  // namespace tinyllama
