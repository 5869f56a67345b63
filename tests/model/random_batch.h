#pragma once
// A training batch for model tests: batch rows of seq + 1 token ids
// (inputs and their next-token targets), drawn from [1, vocab) so that no
// row is token 0 throughout.
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace tinyllama {

inline std::vector<std::int32_t> random_rows(int batch, int seq, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(batch) * (seq + 1));
  for (auto& t : rows) {
    t = static_cast<std::int32_t>(1 + rng.below(static_cast<std::uint64_t>(vocab - 1)));
  }
  return rows;
}

}  // namespace tinyllama
