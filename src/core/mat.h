#pragma once
// A non-owning, typed view of a row-major 2-D block of memory with a row
// stride. Every op in the backend interface takes these: a fused buffer such
// as qkv [tokens, (H+2K)*hd] is sliced into q/k/v column blocks without
// copying, which is how unfused levels run separate GEMMs on the same memory.
#include <cstdint>
#include <stdexcept>

#include "core/dtype.h"

namespace tinyllama {

struct Mat {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // elements between the starts of consecutive rows

  Mat() = default;
  Mat(void* d, DType t, std::int64_t r, std::int64_t c)
      : data(d), dtype(t), rows(r), cols(c), ld(c) {}
  Mat(void* d, DType t, std::int64_t r, std::int64_t c, std::int64_t stride)
      : data(d), dtype(t), rows(r), cols(c), ld(stride) {}

  // Elements [begin, begin + n) of a flat block of dtype t, as one
  // contiguous row (ld = n).
  static Mat flat(void* block, DType t, std::int64_t begin, std::int64_t n) {
    return Mat(Mat(block, t, 1, begin).offset(begin), t, 1, n);
  }

  bool empty() const { return data == nullptr; }
  bool contiguous() const { return ld == cols; }
  std::int64_t numel() const { return rows * cols; }

  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }

  // Columns [c0, c0+n) of every row; the row stride is kept.
  Mat col_block(std::int64_t c0, std::int64_t n) const {
    if (c0 < 0 || n < 0 || c0 + n > cols) throw std::out_of_range("Mat::col_block out of range");
    return Mat(offset(c0), dtype, rows, n, ld);
  }
  // Rows [r0, r0+n).
  Mat row_block(std::int64_t r0, std::int64_t n) const {
    if (r0 < 0 || n < 0 || r0 + n > rows) throw std::out_of_range("Mat::row_block out of range");
    return Mat(offset(r0 * ld), dtype, n, cols, ld);
  }

 private:
  // A view with no memory (data null: a shape only) stays one.
  void* offset(std::int64_t elems) const {
    if (data == nullptr) return nullptr;
    return static_cast<char*>(data) + elems * static_cast<std::int64_t>(dtype_size(dtype));
  }
};

}  // namespace tinyllama
