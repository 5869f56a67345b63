#pragma once
// The small model the CPU FP8 tests train (emulated FP8 GEMMs): every
// linear dimension a multiple of 16, so that every GEMM may run in FP8.
#include "model/config.h"

namespace tinyllama {

inline ModelConfig fp8_test_config() {
  ModelConfig c;
  c.vocab_size = 61;
  c.hidden_dim = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 96;
  return c;
}

}  // namespace tinyllama
