#include "model/param_layout.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace tinyllama {

// Alignment of each slot, in elements: keeps every tensor 256-byte aligned
// for fp32 so vectorised kernels and cuBLASLt see aligned pointers.
constexpr std::int64_t kSlotAlign = 64;

ParamLayout::ParamLayout(const ModelConfig& cfg, std::int64_t span_align, VocabRows vocab_rows)
    : cfg_(cfg), span_align_(span_align) {
  if (span_align_ < 1) throw std::invalid_argument("ParamLayout: span_align must be >= 1");
  const std::int64_t d = cfg.hidden_dim;
  embedding_ = add("embedding", cfg.vocab_size, d, false,
                   vocab_rows == VocabRows::Padded ? cfg.padded_vocab() : cfg.vocab_size);
  close_span();
  for (int l = 0; l < cfg.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerSlots s{};
    s.attn_norm = add(p + "attn_norm", 1, d, true);
    s.wqkv = add(p + "wqkv", cfg.qkv_dim(), d, false);
    s.wo = add(p + "wo", d, cfg.q_dim(), false);
    s.ffn_norm = add(p + "ffn_norm", 1, d, true);
    s.wgu = add(p + "wgu", 2LL * cfg.ffn_dim, d, false);
    s.wdown = add(p + "wdown", d, cfg.ffn_dim, false);
    layers_.push_back(s);
    close_span();
  }
  final_norm_ = add("final_norm", 1, d, true);
  close_span();
}

void ParamLayout::close_span() {
  const std::int64_t begin = spans_.empty() ? 0 : spans_.back().end;
  total_ = (total_ + span_align_ - 1) / span_align_ * span_align_;
  spans_.push_back({begin, total_});
}

namespace {

std::int64_t padded(std::int64_t numel) {
  return (numel + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
}

}  // namespace

ParamSpan ParamLayout::layer_span(int l) const {
  if (l < 0 || l >= cfg_.num_layers) throw std::out_of_range("ParamLayout::layer_span");
  return spans_[static_cast<std::size_t>(l) + 1];  // after the embedding's
}

std::vector<ParamSpan> ParamLayout::non_layer_spans() const {
  return {spans_.front(), spans_.back()};
}

std::vector<ParamSpan> ParamLayout::spans() const {
  return spans_;
}

int ParamLayout::add(std::string name, std::int64_t rows, std::int64_t cols, bool is_norm,
                     std::int64_t stored_rows) {
  ParamSlot s{std::move(name), total_, rows, cols, is_norm, std::max(rows, stored_rows)};
  total_ += padded(s.stored_numel());
  slots_.push_back(std::move(s));
  return static_cast<int>(slots_.size()) - 1;
}

std::vector<SlotRun> slot_runs(const ParamLayout& layout, ParamSpan range,
                               const std::function<int(std::size_t)>& group_of) {
  std::vector<SlotRun> runs;
  const std::vector<ParamSlot>& slots = layout.slots();
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::int64_t end = i + 1 < slots.size() ? slots[i + 1].offset : layout.total();
    const std::int64_t begin = i == 0 ? 0 : slots[i].offset;
    const ParamSpan cut{std::max(begin, range.begin), std::min(end, range.end)};
    if (cut.size() <= 0) continue;
    const int group = group_of(i);
    if (!runs.empty() && runs.back().group == group && runs.back().span.end == cut.begin) {
      runs.back().span.end = cut.end;
    } else {
      runs.push_back({cut, group});
    }
  }
  return runs;
}

std::vector<DecayRun> decay_runs(const ParamLayout& layout, ParamSpan range) {
  const std::vector<ParamSlot>& slots = layout.slots();
  std::vector<DecayRun> runs;
  for (const SlotRun& r :
       slot_runs(layout, range, [&](std::size_t i) { return slots[i].is_norm ? 0 : 1; })) {
    runs.push_back({r.span, r.group == 1});
  }
  return runs;
}

}  // namespace tinyllama
