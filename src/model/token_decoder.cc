#include "model/token_decoder.h"

#include <string>

#include "core/errors.h"

namespace tinyllama {

void check_decode_step(const ModelConfig& cfg, int position, int max_positions,
                       const std::vector<std::int32_t>& tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n == 0) throw UsageError("decoder: no tokens to run");
  if (position + n > max_positions) {
    throw UsageError("decoder: " + std::to_string(position + n) + " positions exceed the " +
                     std::to_string(max_positions) + " it was sized for");
  }
  for (std::int32_t t : tokens) {
    if (t < 0 || t >= cfg.vocab_size) {
      throw UsageError("token " + std::to_string(t) + " is outside [0, " +
                       std::to_string(cfg.vocab_size) + ")");
    }
  }
}

}  // namespace tinyllama
