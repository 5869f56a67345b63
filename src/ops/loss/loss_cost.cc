#include "ops/loss/loss_cost.h"

#include "ops/loss/cross_entropy_rows.h"

namespace tinyllama::prof {

CallCost cross_entropy_fused_cost(const Mat& losses, const Mat& logits) {
  const std::int64_t row_bytes = logits.cols * static_cast<std::int64_t>(dtype_size(logits.dtype));
  // A row that fits a Hopper block's shared memory is read from DRAM once,
  // whether the kernel stages it there or streams it twice: the second pass
  // over a streamed row follows the first within the same block and hits
  // L2 (measured on an H200: 2 KB rows, 67.2 MB read for 65.5 MB of logits,
  // docs/log/2026-11-28.md). A longer row is counted read twice.
  const std::int64_t reads = cuda::cross_entropy_row_fits_on_hopper(row_bytes) ? 1 : 2;
  CallCost cost;
  cost.flops = 2 * kCrossEntropyFlops * logits.rows * logits.cols;
  cost.write_bytes = mat_bytes({logits, losses});  // the gradient over the logits, in place
  cost.bytes = reads * mat_bytes(logits) + logits.rows * kTokenBytes + cost.write_bytes;
  return cost;
}

}  // namespace tinyllama::prof
