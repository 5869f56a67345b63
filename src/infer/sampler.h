#pragma once
// Picking the next token from logits: greedy (temperature 0), or a draw
// from softmax(logits / temperature) restricted to the top_k most likely
// tokens and to the smallest set whose probability reaches top_p (the
// same filters, in the same order, as transformers' generate). Seeded:
// the same seed and logits give the same tokens.
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace tinyllama {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy
  int top_k = 0;             // 0: no limit
  double top_p = 1.0;        // 1: no limit
};

// Throws UsageError naming the flag for a value out of range
// (--temperature >= 0, --top-k >= 0, 0 < --top-p <= 1).
void validate(const SamplingOptions& o);

// The chosen token; ties in greedy mode go to the lowest id.
std::int32_t sample_token(const std::vector<double>& logits, const SamplingOptions& o, Rng& rng);

}  // namespace tinyllama
