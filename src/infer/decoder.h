#pragma once
// Incremental decoding on the CPU with a KV cache: a chunk of tokens (the
// prompt, then one token per step) runs through the model at the positions
// after the ones already cached, its keys and values are appended to the
// cache, and the prefix is never recomputed. The math is the training
// forward pass's (DESIGN §1), through the same CPU ops; a prefill of a row
// computes the losses the training model computes (tests/infer). The CUDA
// decoder (cuda/cuda_decoder) runs the same steps on the GPU.
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/cpu_backend.h"
#include "model/param_layout.h"
#include "model/token_decoder.h"

namespace tinyllama {

class Decoder final : public TokenDecoder {
 public:
  // params: tinyllama's flat layout (ParamLayout of cfg), as load_hf_weights
  // returns it. dtype F32 (BLAS GEMMs when the build has them) or F64.
  // max_positions bounds prompt + generated tokens (the cache's rows).
  Decoder(const ModelConfig& cfg, const std::vector<double>& params, int max_positions,
          DType dtype = DType::F32);
  ~Decoder() override;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  std::vector<double> step(const std::vector<std::int32_t>& tokens,
                           bool all_logits = false) override;
  int position() const override { return position_; }
  int max_positions() const override { return max_positions_; }
  void reset() override { position_ = 0; }
  std::string describe() const override;

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
