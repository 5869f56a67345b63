#include "data/batch_sampler.h"

#include <numeric>
#include <utility>

#include "core/errors.h"
#include "core/rng.h"

namespace tinyllama {
namespace {

constexpr std::uint64_t kOrderStream = 0xD1B54A32D192ED03ULL;
constexpr const char* kKind = "token_windows";

}  // namespace

BatchSampler::BatchSampler(const TokenDataset& data, int seq, std::uint64_t seed, bool shuffle,
                           const std::string& flag)
    : data_(data), row_len_(seq + 1), seed_(seed), shuffle_(shuffle) {
  fingerprint_ = data.fingerprint();
  for (int p = 0; p < static_cast<int>(data.parts.size()); ++p) {
    const auto n = static_cast<std::int64_t>(data.parts[p].tokens.size());
    for (std::int64_t s = 0; s + row_len_ <= n; s += seq) starts_.emplace_back(p, s);
  }
  if (starts_.empty()) {
    throw UsageError(flag + ": " + data.description() + " hold no row of --seq-len + 1 = " +
                     std::to_string(row_len_) + " tokens within one file");
  }
  order_.resize(starts_.size());
  shuffle_epoch();
}

void BatchSampler::shuffle_epoch() {
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  if (!shuffle_) return;
  // One generator per epoch, so any epoch's order follows from (seed, epoch).
  Rng rng(seed_ ^ kOrderStream ^ (static_cast<std::uint64_t>(epoch_) * 0x9E3779B97F4A7C15ULL));
  for (std::size_t i = order_.size() - 1; i > 0; --i) {
    std::swap(order_[i], order_[rng.below(i + 1)]);
  }
}

std::vector<std::int32_t> BatchSampler::next_batch(int batch) {
  std::vector<std::int32_t> rows(static_cast<std::size_t>(batch) * row_len_);
  for (int b = 0; b < batch; ++b) {
    if (position_ == windows()) {
      ++epoch_;
      position_ = 0;
      shuffle_epoch();
    }
    const auto [part, start] = starts_[static_cast<std::size_t>(order_[position_++])];
    const std::vector<std::uint32_t>& tokens = data_.parts[part].tokens;
    std::copy(tokens.begin() + start, tokens.begin() + start + row_len_,
              rows.begin() + static_cast<std::ptrdiff_t>(b) * row_len_);
  }
  return rows;
}

nlohmann::json BatchSampler::state() const {
  return {{"kind", kKind},       {"data", fingerprint_}, {"row_len", row_len_},  {"seed", seed_},
          {"shuffle", shuffle_}, {"epoch", epoch_},      {"position", position_}};
}

void BatchSampler::restore(const nlohmann::json& s) {
  if (!s.is_object() || s.value("kind", "") != kKind) {
    throw UsageError("--data: the checkpoint was trained on " +
                     (s.is_object() ? s.value("kind", std::string("?")) : std::string("?")) +
                     " data, not on --data");
  }
  if (s.at("data").get<std::string>() != fingerprint_) {
    throw UsageError("--data: the checkpoint was trained on " + s.at("data").get<std::string>() +
                     ", not on " + fingerprint_ + " (files and token counts must match)");
  }
  if (s.at("row_len").get<int>() != row_len_) {
    throw UsageError("--seq-len: the checkpoint's rows hold " +
                     std::to_string(s.at("row_len").get<int>()) + " tokens, not " +
                     std::to_string(row_len_));
  }
  if (s.at("seed").get<std::uint64_t>() != seed_) {
    throw UsageError("--data-seed: the checkpoint's run drew its batches with seed " +
                     std::to_string(s.at("seed").get<std::uint64_t>()) + ", not " +
                     std::to_string(seed_) + " (--data-seed, or --seed without it)");
  }
  epoch_ = s.at("epoch").get<std::int64_t>();
  position_ = s.at("position").get<std::int64_t>();
  if (position_ < 0 || position_ > windows() || epoch_ < 0) {
    throw UsageError("--resume: the checkpoint's data position is out of range");
  }
  shuffle_epoch();
}

}  // namespace tinyllama
