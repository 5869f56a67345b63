#pragma once
// Where each parameter's gradient lives in the gradient block
// (GradBuffers, model/step_plan.h). Full: at the parameter's own offset, the
// block as long as the parameters'. Ring: the embedding's span, then two
// layer-sized slots that layer l's gradients take in turn (slot l % 2), then
// the final norm's span: (L - 2) layers shorter. Layers share their shapes,
// so every layer span has the same size and maps onto a slot whole.
#include <cstdint>

#include "model/param_layout.h"
#include "model/step_plan.h"

namespace tinyllama {

class GradLayout {
 public:
  GradLayout(const ParamLayout& params, GradBuffers buffers);

  // Elements of the gradient block.
  std::int64_t total() const { return total_; }
  // The gradient block's offset of the parameter element at `param_offset`
  // of the flat parameter block.
  std::int64_t offset(std::int64_t param_offset) const;
  // A span of the parameter block that lies within one ParamLayout span (a
  // layer's, the embedding's, the final norm's), in the gradient block.
  ParamSpan span(ParamSpan params) const;
  // The slot layer l's gradients occupy; Full: l (every layer its own).
  int slot_of_layer(int l) const { return ring_slots_ > 0 ? l % ring_slots_ : l; }
  // Ring: the slots the layers take turns in (2, or L when L < 2); Full: 0.
  int ring_slots() const { return ring_slots_; }

 private:
  int ring_slots_ = 0;
  std::int64_t layers_begin_ = 0;  // where the first layer's span starts (both blocks)
  std::int64_t layer_size_ = 0;    // one layer span's elements
  std::int64_t tail_begin_ = 0;    // the final norm's span in the parameter block
  std::int64_t total_ = 0;
};

}  // namespace tinyllama
