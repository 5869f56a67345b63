#pragma once
// Where every parameter lives inside the one flat parameter buffer. The same
// offsets index the gradient and both AdamW moment buffers, so all four are
// one allocation each and the optimizer can run over them in one pass.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/config.h"

namespace tinyllama {

// One parameter tensor: a row-major [rows, cols] block at `offset` elements.
struct ParamSlot {
  std::string name;  // tinyllama's own name, e.g. "layers.3.wqkv"
  std::int64_t offset = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool is_norm = false;  // initialised to ones rather than N(0, 0.02)
  // Rows reserved in the flat buffers, >= rows. The embedding reserves
  // ModelConfig::padded_vocab() rows for the LM-head GEMMs; rows past
  // `rows` are zero and stay zero (zero logits, zero gradients, zero AdamW
  // updates), and nothing outside the LM head reads them.
  std::int64_t stored_rows = 0;
  std::int64_t numel() const { return rows * cols; }
  std::int64_t stored_numel() const { return stored_rows * cols; }
};

// Elements [begin, end) of the flat buffers, slot padding included.
struct ParamSpan {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};

struct LayerSlots {
  int attn_norm, wqkv, wo, ffn_norm, wgu, wdown;  // indices into ParamLayout::slots
};

// How many rows the embedding reserves: Padded, ModelConfig::padded_vocab()
// (the layout the model computes in); Exact, vocab_size (what checkpoints
// hold, so that the padding the GEMMs want never shows in a file).
enum class VocabRows { Padded, Exact };

class ParamLayout {
 public:
  // span_align: every span (each layer's, the embedding's, the final
  // norm's) starts and ends on a multiple of this many elements, so that a
  // data-parallel run can cut each one into equal aligned shards
  // (DataParallel::span_align); 1 (one rank) adds no padding. The values a
  // layout holds do not depend on it: only where the slots sit.
  explicit ParamLayout(const ModelConfig& cfg, std::int64_t span_align = 1,
                       VocabRows vocab_rows = VocabRows::Padded);

  const std::vector<ParamSlot>& slots() const { return slots_; }
  const ParamSlot& embedding() const { return slots_[embedding_]; }
  const ParamSlot& final_norm() const { return slots_[final_norm_]; }
  const ParamSlot& layer(int l, int LayerSlots::*which) const { return slots_[layers_[l].*which]; }
  std::int64_t total() const { return total_; }
  // Layer l's slots: one contiguous span (the slots are laid out layer by
  // layer), so a layer's parameters can be updated in one sweep.
  ParamSpan layer_span(int l) const;
  // What the layer spans leave of [0, total): the embedding before them, the
  // final norm after them.
  std::vector<ParamSpan> non_layer_spans() const;
  // Every span in order, [0, total) without gaps: the embedding's, the
  // layers', the final norm's (the buckets of a data-parallel run).
  std::vector<ParamSpan> spans() const;
  const ModelConfig& config() const { return cfg_; }

 private:
  int add(std::string name, std::int64_t rows, std::int64_t cols, bool is_norm,
          std::int64_t stored_rows = 0);
  void close_span();  // pads total_ to span_align_ and records the span

  ModelConfig cfg_;
  std::vector<ParamSlot> slots_;
  std::vector<LayerSlots> layers_;
  int embedding_ = 0;
  int final_norm_ = 0;
  std::int64_t total_ = 0;
  std::int64_t span_align_ = 1;
  std::vector<ParamSpan> spans_;  // spans() in order: embedding, layers, final norm
};

// A run of the flat buffers whose slots share a group of the caller's
// (group_of: a slot's index in ParamLayout::slots -> its group). A slot's
// run reaches to the next slot (padding included); the first slot's takes
// any padding before it.
struct SlotRun {
  ParamSpan span;
  int group = 0;
};
// The runs that cover `range`, in order, adjacent runs of one group merged.
std::vector<SlotRun> slot_runs(const ParamLayout& layout, ParamSpan range,
                               const std::function<int(std::size_t)>& group_of);

// A run of the flat buffers whose slots share a weight-decay group
// (UpdateRecipe::decay_matrices_only): decay false for the norm weights.
// A slot's run reaches to the next slot (padding included).
struct DecayRun {
  ParamSpan span;
  bool decay = true;
};
// The runs that cover `range`, in order, adjacent runs of one group merged.
std::vector<DecayRun> decay_runs(const ParamLayout& layout, ParamSpan range);

}  // namespace tinyllama
