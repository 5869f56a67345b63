#include "io/hf_rope.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace tinyllama {

std::int64_t interleaved_row_of_rotate_half_row(std::int64_t j, std::int64_t head_dim) {
  const std::int64_t half = head_dim / 2;
  return j < half ? 2 * j : 2 * (j - half) + 1;
}

void reorder_rope_rows(double* data, std::int64_t rows, std::int64_t cols, std::int64_t head_dim,
                       RopeLayout from, RopeLayout to) {
  if (head_dim <= 0 || head_dim % 2 != 0 || rows % head_dim != 0 || cols < 0) {
    throw std::invalid_argument("reorder_rope_rows: " + std::to_string(rows) +
                                " rows are not whole heads of even head_dim " +
                                std::to_string(head_dim));
  }
  if (from == to) return;
  std::vector<double> head(static_cast<std::size_t>(head_dim * cols));
  for (std::int64_t h0 = 0; h0 < rows; h0 += head_dim) {
    double* block = data + h0 * cols;
    std::copy(block, block + head_dim * cols, head.begin());
    for (std::int64_t j = 0; j < head_dim; ++j) {
      const std::int64_t i = interleaved_row_of_rotate_half_row(j, head_dim);
      // To rotate-half: row j takes interleaved row i; back: row i takes row j.
      const std::int64_t dst = to == RopeLayout::RotateHalf ? j : i;
      const std::int64_t src = to == RopeLayout::RotateHalf ? i : j;
      std::copy_n(head.begin() + src * cols, cols, block + dst * cols);
    }
  }
}

}  // namespace tinyllama
