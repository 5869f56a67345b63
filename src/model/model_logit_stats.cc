// --log-logit-stats: the debugging exercise's first tool (docs/EXERCISES.md).
// Logits that grow without bound (broken-init's N(0, 1) weights) show here
// before anything else does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/narrow_float.h"
#include "model/model.h"

namespace tinyllama {

LogitStats Model::logit_stats() {
  if (acts_.final_norm_under_scratch) {
    throw std::logic_error(
        "Model::logit_stats: the final norm's output lies under the backward scratch (resolve "
        "the plan with PlanRequest::final_norm_reader)");
  }
  const Mat nf = acts_.view(arena_, acts_.final_norm);
  const Mat buffer = padded_logits(acts_.view(arena_, acts_.logits));
  const std::size_t element = dtype_size(buffer.dtype);
  std::vector<unsigned char> host(static_cast<std::size_t>(buffer.rows * buffer.ld) * element);
  double sum = 0, sum_sq = 0, max = -std::numeric_limits<double>::infinity();
  for (std::int64_t r0 = 0; r0 < nf.rows; r0 += buffer.rows) {
    const std::int64_t rows = std::min(buffer.rows, nf.rows - r0);
    const Mat logits = buffer.row_block(0, rows);
    backend_.gemm(logits, nf.row_block(r0, rows), false, lm_head_weight(), true, 1.0f, 0.0f);
    backend_.download(host.data(), logits.data,
                      static_cast<std::size_t>(rows * logits.ld) * element);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cfg_.vocab_size; ++c) {
        const double x = decode_element(host.data() + (r * logits.ld + c) * element, logits.dtype);
        sum += x;
        sum_sq += x * x;
        max = std::max(max, x);
      }
    }
  }
  const double n = static_cast<double>(nf.rows) * cfg_.vocab_size;
  const double mean = sum / n;
  return {mean, std::sqrt(std::max(0.0, sum_sq / n - mean * mean)), max};
}

}  // namespace tinyllama
