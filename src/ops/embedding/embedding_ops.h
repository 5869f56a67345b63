#pragma once
// The token embedding and its gradient.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include <cstdint>

#include "core/mat.h"

namespace tinyllama {

class EmbeddingOps {
 public:
  virtual ~EmbeddingOps() = default;

  // out[i] = table[tokens[i]]; tokens has out.rows entries (device memory).
  virtual void embedding_forward(Mat out, const std::int32_t* tokens, Mat table) = 0;
  // dtable[tokens[i]] += dout[i] (accumulates: the tied LM head wrote first).
  virtual void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) = 0;
  // Whatever of embedding_backward depends on the tokens alone (CUDA's
  // sorted gradient: the sort), issued now, beside the ops that follow, so
  // that the next embedding_backward over the same tokens, n positions and
  // a table of `vocab` rows does only the rest. Optional: by default nothing,
  // and every embedding_backward does all of its work.
  virtual void embedding_backward_prepare(const std::int32_t* /*tokens*/, std::int64_t /*n*/,
                                          std::int64_t /*vocab*/) {}
};

}  // namespace tinyllama
