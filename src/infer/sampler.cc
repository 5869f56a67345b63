#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "core/errors.h"

namespace tinyllama {

void validate(const SamplingOptions& o) {
  char v[32];
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) {
    std::snprintf(v, sizeof v, "%g", o.temperature);
    throw UsageError(std::string("--temperature ") + v + ": must be a finite number >= 0");
  }
  if (o.top_k < 0) {
    throw UsageError("--top-k " + std::to_string(o.top_k) + ": must be >= 0 (0: no limit)");
  }
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    std::snprintf(v, sizeof v, "%g", o.top_p);
    throw UsageError(std::string("--top-p ") + v + ": must lie in (0, 1] (1: no limit)");
  }
}

std::int32_t sample_token(const std::vector<double>& logits, const SamplingOptions& o, Rng& rng) {
  const auto greedy = [&] {
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) -
                                     logits.begin());
  };
  if (o.temperature == 0 || o.top_k == 1) return greedy();
  // Candidates by descending logit (ids ascending among equals), then the filters.
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
  if (o.top_k > 0 && static_cast<std::size_t>(o.top_k) < ids.size()) ids.resize(o.top_k);
  const double top = logits[ids.front()];
  std::vector<double> p(ids.size());
  double sum = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    p[i] = std::exp((logits[ids[i]] - top) / o.temperature);
    sum += p[i];
  }
  // top-p: keep the smallest prefix whose probability reaches top_p (the
  // most likely token always stays).
  std::size_t keep = ids.size();
  if (o.top_p < 1) {
    double cumulative = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      cumulative += p[i] / sum;
      if (cumulative >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += p[i];
  double u = rng.uniform() * kept;
  for (std::size_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u < 0) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace tinyllama
