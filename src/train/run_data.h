#pragma once
// The batches a run trains and evaluates on, from its options: the
// synthetic pool (DESIGN §1), or --data with a held-out part (--val-data, or
// the tail --val-fraction of each --data file when --eval-every asks for a
// validation loss).
#include <memory>
#include <string>

#include "data/batch_sampler.h"
#include "data/batch_source.h"
#include "data/token_dataset.h"
#include "model/model.h"
#include "train/options.h"

namespace tinyllama {

class RunData {
 public:
  // Reads the data. Throws UsageError for missing files, text that is not
  // UTF-8, data too short for one row, or a token past --vocab-size.
  explicit RunData(const TrainOptions& opts);

  BatchSource& train() { return *train_; }
  bool has_validation() const { return val_tokens_ != nullptr; }
  // One line for the run header: "synthetic ..." or the files and tokens.
  const std::string& description() const { return description_; }

  // Mean loss over `batches` validation batches: the same batches at every
  // call (read in order from the start). Runs forward passes only; nothing
  // may be in flight on the model.
  double evaluate(Model& model, int batches, int batch_size) const;

 private:
  std::unique_ptr<TokenDataset> train_tokens_;
  std::unique_ptr<TokenDataset> val_tokens_;
  std::unique_ptr<BatchSource> train_;
  int seq_ = 0;
  std::string description_;
};

}  // namespace tinyllama
