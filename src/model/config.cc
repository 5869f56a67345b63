#include "model/config.h"

#include <cstdint>
#include <string>

#include "core/errors.h"

namespace tinyllama {
namespace {

void require_positive(const char* flag, long long value) {
  if (value < 1) {
    throw UsageError(std::string("--") + flag + " " + std::to_string(value) +
                     ": must be at least 1");
  }
}

}  // namespace

int ModelConfig::default_kv_heads(int heads) {
  return heads % 2 == 0 ? heads / 2 : heads;
}

int ModelConfig::default_ffn_dim(int hidden_dim) {
  const std::int64_t ffn = 4 * static_cast<std::int64_t>(hidden_dim);
  if (ffn > INT32_MAX) {
    throw UsageError("--hidden-dim " + std::to_string(hidden_dim) +
                     ": too large (the default --ffn-dim 4*D overflows)");
  }
  return static_cast<int>(ffn);
}

void ModelConfig::validate() const {
  if (vocab_size < 2) {
    throw UsageError("--vocab-size " + std::to_string(vocab_size) + ": must be at least 2");
  }
  require_positive("hidden-dim", hidden_dim);
  require_positive("num-layers", num_layers);
  require_positive("num-heads", num_heads);
  require_positive("num-kv-heads", num_kv_heads);
  require_positive("ffn-dim", ffn_dim);
  if (hidden_dim % num_heads != 0) {
    throw UsageError("--hidden-dim " + std::to_string(hidden_dim) +
                     ": must be divisible by --num-heads " + std::to_string(num_heads));
  }
  if (head_dim() % 2 != 0) {
    throw UsageError("--hidden-dim " + std::to_string(hidden_dim) + " / --num-heads " +
                     std::to_string(num_heads) + " gives head_dim " + std::to_string(head_dim()) +
                     ": head_dim must be even for RoPE");
  }
  if (num_heads % num_kv_heads != 0) {
    throw UsageError("--num-heads " + std::to_string(num_heads) +
                     ": must be divisible by --num-kv-heads " + std::to_string(num_kv_heads));
  }
}

}  // namespace tinyllama
