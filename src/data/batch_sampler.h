#pragma once
// Training rows from a token dataset: the data is cut into windows of seq+1
// tokens (starting every seq tokens, so each token is a target once per
// epoch; no window crosses a file), and each epoch visits every window once
// in an order drawn from the seed and the epoch number. The state is the
// epoch and the position in it, so a resumed run draws exactly the batches
// an uninterrupted one would. Unshuffled, it reads the windows in order from
// the start (the validation batches, the same ones at every evaluation).
#include <cstdint>
#include <string>
#include <vector>

#include "data/batch_source.h"
#include "data/token_dataset.h"

namespace tinyllama {

class BatchSampler : public BatchSource {
 public:
  // Throws UsageError naming `flag` when the data holds no whole window.
  BatchSampler(const TokenDataset& data, int seq, std::uint64_t seed, bool shuffle,
               const std::string& flag);

  std::vector<std::int32_t> next_batch(int batch) override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;

  std::int64_t windows() const { return static_cast<std::int64_t>(starts_.size()); }

 private:
  void shuffle_epoch();

  const TokenDataset& data_;
  int row_len_;
  std::uint64_t seed_;
  bool shuffle_;
  std::string fingerprint_;
  // Window w starts at token starts_[w].second of part starts_[w].first.
  std::vector<std::pair<int, std::int64_t>> starts_;
  std::vector<std::int64_t> order_;  // this epoch's order of windows
  std::int64_t epoch_ = 0;
  std::int64_t position_ = 0;  // windows of this epoch drawn so far
};

}  // namespace tinyllama
