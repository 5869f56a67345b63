#pragma once
// DESIGN §1 synthetic data: a pool of rows of seq+1 tokens uniform in
// [1, vocab), fixed seed; each step draws batch distinct rows.
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "data/batch_source.h"

namespace tinyllama {

class SyntheticData : public BatchSource {
 public:
  SyntheticData(int vocab, int seq, int pool_rows, std::uint64_t seed);

  // batch distinct rows, concatenated: batch * (seq + 1) tokens.
  std::vector<std::int32_t> next_batch(int batch) override;
  // The draw generator and the order the partial shuffles left behind.
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;
  int pool_rows() const { return pool_rows_; }

 private:
  std::uint64_t seed_;
  int row_len_;
  int pool_rows_;
  std::vector<std::int32_t> pool_;
  std::vector<int> order_;  // scratch for drawing distinct rows
  Rng draw_;
};

}  // namespace tinyllama
