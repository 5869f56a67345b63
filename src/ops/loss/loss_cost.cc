#include "ops/loss/loss_cost.h"

#include "ops/loss/cross_entropy_rows.h"

namespace tinyllama::prof {

CallCost cross_entropy_fused_cost(const Mat& losses, const Mat& logits, LossRows rows) {
  const std::int64_t row_bytes = logits.cols * static_cast<std::int64_t>(dtype_size(logits.dtype));
  const bool staged = rows == LossRows::Staged ? cuda::cross_entropy_row_fits_on_hopper(row_bytes)
                      : rows == LossRows::Streamed
                          ? false
                          : cuda::cross_entropy_row_staged_on_hopper(row_bytes);
  CallCost cost;
  cost.flops = 2 * kCrossEntropyFlops * logits.rows * logits.cols;
  cost.bytes = (staged ? 2 : 3) * mat_bytes(logits) + logits.rows * kTokenBytes + mat_bytes(losses);
  return cost;
}

}  // namespace tinyllama::prof
