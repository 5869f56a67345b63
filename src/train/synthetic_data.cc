#include "train/synthetic_data.h"

#include <numeric>
#include <stdexcept>
#include <utility>

#include "core/errors.h"

namespace tinyllama {

// The pool and the draws use separate streams so the pool does not depend on
// how many steps are drawn.
constexpr std::uint64_t kDrawStream = 0x9E3779B97F4A7C15ULL;

SyntheticData::SyntheticData(int vocab, int seq, int pool_rows, std::uint64_t seed)
    : seed_(seed),
      row_len_(seq + 1),
      pool_rows_(pool_rows),
      order_(static_cast<std::size_t>(pool_rows)),
      draw_(seed ^ kDrawStream) {
  Rng fill(seed);
  pool_.resize(static_cast<std::size_t>(pool_rows) * row_len_);
  for (auto& t : pool_)
    t = static_cast<std::int32_t>(1 + fill.below(static_cast<std::uint64_t>(vocab - 1)));
  std::iota(order_.begin(), order_.end(), 0);
}

std::vector<std::int32_t> SyntheticData::next_batch(int batch) {
  if (batch > pool_rows_) throw std::invalid_argument("batch larger than the data pool");
  // Partial Fisher-Yates: the first `batch` entries become a uniform sample
  // without replacement.
  for (int i = 0; i < batch; ++i) {
    const int j = i + static_cast<int>(draw_.below(static_cast<std::uint64_t>(pool_rows_ - i)));
    std::swap(order_[i], order_[j]);
  }
  std::vector<std::int32_t> rows(static_cast<std::size_t>(batch) * row_len_);
  for (int i = 0; i < batch; ++i) {
    const auto src = pool_.begin() + static_cast<std::ptrdiff_t>(order_[i]) * row_len_;
    std::copy(src, src + row_len_, rows.begin() + static_cast<std::ptrdiff_t>(i) * row_len_);
  }
  return rows;
}

nlohmann::json SyntheticData::state() const {
  return {{"kind", "synthetic"}, {"seed", seed_}, {"draw", draw_.state()}, {"order", order_}};
}

void SyntheticData::restore(const nlohmann::json& s) {
  if (!s.is_object() || s.value("kind", "") != "synthetic") {
    throw UsageError("--data: the checkpoint was trained on --data, not on synthetic tokens");
  }
  if (s.at("seed").get<std::uint64_t>() != seed_) {
    throw UsageError("--data-seed: the checkpoint's run drew its batches with seed " +
                     std::to_string(s.at("seed").get<std::uint64_t>()) + ", not " +
                     std::to_string(seed_) + " (--data-seed, or --seed without it)");
  }
  std::vector<int> order = s.at("order").get<std::vector<int>>();
  if (order.size() != order_.size() || !draw_.restore(s.at("draw").get<std::string>())) {
    throw UsageError("--resume: the checkpoint's synthetic data state does not fit this run");
  }
  order_ = std::move(order);
}

}  // namespace tinyllama
