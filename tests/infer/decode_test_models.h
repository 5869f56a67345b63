#pragma once
// The models the decoder tests run, shared by the CPU checks of the rounded
// references (rounded_reference_test.cc) and the CUDA decoder's tests
// (tests/cuda/gpu_decoder_test.cc), so the limits measured on the CPU are
// measured on the weights the GPU runs. Shapes are awkward on purpose: GQA
// groups 1, 2, 4 and 3, head_dim 32, 64, 128 and 34 (widths that are not
// multiples of 8 take the kernels' scalar paths), odd vocabularies.
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "model/config.h"
#include "model/init.h"
#include "model/param_layout.h"

namespace tinyllama::decode_test {

inline constexpr int kModels = 4;

inline ModelConfig model_config(int index) {
  ModelConfig c;
  c.num_layers = 2;
  switch (index) {
    case 0:  // group 1, head_dim 32
      c.vocab_size = 97, c.hidden_dim = 128, c.num_heads = 4, c.num_kv_heads = 4, c.ffn_dim = 100;
      break;
    case 1:  // group 2, head_dim 64
      c.vocab_size = 301, c.hidden_dim = 256, c.num_heads = 4, c.num_kv_heads = 2, c.ffn_dim = 200;
      break;
    case 2:  // group 4, head_dim 128
      c.vocab_size = 131, c.hidden_dim = 512, c.num_heads = 4, c.num_kv_heads = 1, c.ffn_dim = 264;
      c.num_layers = 1;
      break;
    default:  // group 3, head_dim 34: widths that are not multiples of 8
      c.vocab_size = 53, c.hidden_dim = 102, c.num_heads = 3, c.num_kv_heads = 1, c.ffn_dim = 70;
      break;
  }
  return c;
}

// Larger than init's N(0, 0.02), so attention and RoPE visibly matter.
inline std::vector<double> model_weights(const ParamLayout& layout, std::uint64_t seed,
                                         double spread = 0.15) {
  std::vector<double> w = initial_weights(layout, seed);
  Rng rng(seed + 1);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      w[s.offset + i] += s.is_norm ? 0.2 * rng.normal() : spread * rng.normal();
    }
  }
  return w;
}

inline std::vector<std::int32_t> random_tokens(int n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return t;
}

}  // namespace tinyllama::decode_test
