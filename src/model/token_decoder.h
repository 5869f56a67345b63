#pragma once
// What `generate` drives: a model decoded incrementally with a KV cache, on
// whichever device holds it. The CPU decoder (infer/decoder.h) and the CUDA
// one (cuda/cuda_decoder with ops/decode's kernels, made through cuda/cuda_entry.h) implement it;
// the interface lives here, below both, because cuda may not include infer.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace tinyllama {

class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;
  // Runs `tokens` at positions position() .. position() + n - 1 and caches
  // them. Returns the logits of the last token ([vocab]), or of every token
  // ([n * vocab], row-major) with all_logits. Throws UsageError past
  // max_positions or for a token outside [0, vocab).
  virtual std::vector<double> step(const std::vector<std::int32_t>& tokens,
                                   bool all_logits = false) = 0;
  virtual int position() const = 0;
  virtual int max_positions() const = 0;
  virtual void reset() = 0;  // forget the cache
  // Where and how it decodes, for generate's speed line: "cpu",
  // "cuda bfloat16, graph, own gemv".
  virtual std::string describe() const = 0;
};

// The checks every decoder makes before a step (the UsageErrors above), so
// both devices refuse the same calls with the same words.
void check_decode_step(const ModelConfig& cfg, int position, int max_positions,
                       const std::vector<std::int32_t>& tokens);

}  // namespace tinyllama
