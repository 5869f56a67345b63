#include "model/grad_layout.h"

#include <algorithm>
#include <stdexcept>

namespace tinyllama {

GradLayout::GradLayout(const ParamLayout& params, GradBuffers buffers) : total_(params.total()) {
  const int layers = params.config().num_layers;
  if (buffers != GradBuffers::Ring || layers < 1) return;
  ring_slots_ = std::min(2, layers);
  const ParamSpan first = params.layer_span(0);
  layers_begin_ = first.begin;
  layer_size_ = first.size();
  tail_begin_ = params.layer_span(layers - 1).end;
  total_ = layers_begin_ + ring_slots_ * layer_size_ + (params.total() - tail_begin_);
}

std::int64_t GradLayout::offset(std::int64_t param_offset) const {
  if (ring_slots_ == 0 || param_offset < layers_begin_) return param_offset;
  if (param_offset >= tail_begin_) {
    return layers_begin_ + ring_slots_ * layer_size_ + (param_offset - tail_begin_);
  }
  const std::int64_t within = param_offset - layers_begin_;
  const std::int64_t layer = within / layer_size_;
  return layers_begin_ + (layer % ring_slots_) * layer_size_ + within % layer_size_;
}

ParamSpan GradLayout::span(ParamSpan params) const {
  if (params.size() == 0) return {offset(params.begin), offset(params.begin)};
  const std::int64_t begin = offset(params.begin);
  // The last element's offset, not end's: end may be the next span's start.
  const std::int64_t end = offset(params.end - 1) + 1;
  if (end - begin != params.size()) {
    throw std::logic_error("GradLayout::span: the span crosses a layer's boundary");
  }
  return {begin, end};
}

}  // namespace tinyllama
