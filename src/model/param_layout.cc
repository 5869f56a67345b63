#include "model/param_layout.h"

#include <algorithm>
#include <utility>

namespace tinyllama {

// Alignment of each slot, in elements: keeps every tensor 256-byte aligned
// for fp32 so vectorised kernels and cuBLASLt see aligned pointers.
constexpr std::int64_t kSlotAlign = 64;

ParamLayout::ParamLayout(const ModelConfig& cfg) : cfg_(cfg) {
  const std::int64_t d = cfg.hidden_dim;
  embedding_ = add("embedding", cfg.vocab_size, d, false, cfg.padded_vocab());
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
  }
  final_norm_ = add("final_norm", 1, d, true);
}

namespace {

std::int64_t padded(std::int64_t numel) {
  return (numel + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
}

}  // namespace

ParamSpan ParamLayout::layer_span(int l) const {
  const LayerSlots& s = layers_.at(static_cast<std::size_t>(l));
  ParamSpan span{total_, 0};
  for (int index : {s.attn_norm, s.wqkv, s.wo, s.ffn_norm, s.wgu, s.wdown}) {
    const ParamSlot& slot = slots_[static_cast<std::size_t>(index)];
    span.begin = std::min(span.begin, slot.offset);
    span.end = std::max(span.end, slot.offset + padded(slot.stored_numel()));
  }
  return span;
}

std::vector<ParamSpan> ParamLayout::non_layer_spans() const {
  std::vector<ParamSpan> rest;
  std::int64_t at = 0;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const ParamSpan span = layer_span(l);
    if (span.begin > at) rest.push_back({at, span.begin});
    at = span.end;
  }
  if (total_ > at) rest.push_back({at, total_});
  return rest;
}

int ParamLayout::add(std::string name, std::int64_t rows, std::int64_t cols, bool is_norm,
                     std::int64_t stored_rows) {
  ParamSlot s{std::move(name), total_, rows, cols, is_norm, std::max(rows, stored_rows)};
  total_ += padded(s.stored_numel());
  slots_.push_back(std::move(s));
  return static_cast<int>(slots_.size()) - 1;
}

}  // namespace tinyllama
