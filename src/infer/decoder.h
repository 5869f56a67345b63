#pragma once
// Incremental decoding on the CPU with a KV cache: a chunk of tokens (the
// prompt, then one token per step) runs through the model at the positions
// after the ones already cached, its keys and values are appended to the
// cache, and the prefix is never recomputed. The math is the training
// forward pass's (DESIGN §1), through the same CPU ops; a prefill of a row
// computes the losses the training model computes (tests/infer).
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/cpu_backend.h"
#include "model/param_layout.h"

namespace tinyllama {

class Decoder {
 public:
  // params: tinyllama's flat layout (ParamLayout of cfg), as load_hf_weights
  // returns it. dtype F32 (BLAS GEMMs when the build has them) or F64.
  // max_positions bounds prompt + generated tokens (the cache's rows).
  Decoder(const ModelConfig& cfg, const std::vector<double>& params, int max_positions,
          DType dtype = DType::F32);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Runs `tokens` at positions position() .. position() + n - 1 and caches
  // them. Returns the logits of the last token ([vocab]), or of every token
  // ([n * vocab], row-major) with all_logits. Throws UsageError past
  // max_positions or for a token outside [0, vocab).
  std::vector<double> step(const std::vector<std::int32_t>& tokens, bool all_logits = false);

  int position() const { return position_; }
  int max_positions() const { return max_positions_; }
  void reset() { position_ = 0; }  // forget the cache

 private:
  struct Buffer;
  Mat view(Buffer& b, std::int64_t rows, std::int64_t cols) const;
  Mat weight(const ParamSlot& s) const;

  ModelConfig cfg_;
  ParamLayout layout_;
  int max_positions_;
  DType dtype_;
  int position_ = 0;
  CpuBackend backend_{CpuKernels::Fast};
  std::unique_ptr<Buffer> weights_;
  std::vector<std::unique_ptr<Buffer>> k_cache_, v_cache_;  // per layer [max_positions, kv_dim]
  std::unique_ptr<Buffer> x_, norm_, rstd_, qkv_, attn_, proj_, gate_up_, act_, logits_;
};

}  // namespace tinyllama
