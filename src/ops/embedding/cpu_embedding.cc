// Embedding lookup and its gradient. Token ids live in host memory on the
// CPU backend. The backward pass accumulates because the tied LM head has
// already written its part of the embedding gradient; rows are visited in
// order, so repeated tokens sum in a fixed order.
#include "ops/embedding/cpu_embedding.h"
#include "cpu/cpu_common.h"

namespace tinyllama::cpu {
namespace {

void check_tokens(const std::string& op, const std::int32_t* tokens, std::int64_t n,
                  std::int64_t vocab) {
  require(tokens != nullptr || n == 0, op, "token pointer is null");
  for (std::int64_t i = 0; i < n; ++i) {
    require(tokens[i] >= 0 && tokens[i] < vocab, op,
            "token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                " is outside [0, " + std::to_string(vocab) + ")");
  }
}

}  // namespace

void embedding_forward(Mat out, const std::int32_t* tokens, Mat table) {
  const std::string op = "embedding_forward";
  require_shape(table, table.rows, out.cols, op, "table");
  require_shape(out, out.rows, table.cols, op, "out");
  check_tokens(op, tokens, out.rows, table.rows);
  dispatch(common_dtype(op, {out, table}), op, [&](auto t) {
    using T = decltype(t);
    parallel_for(out.rows, static_cast<double>(out.cols), [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        const T* src = row<T>(table, tokens[i]);
        T* dst = row<T>(out, i);
        for (std::int64_t c = 0; c < out.cols; ++c) dst[c] = src[c];
      }
    });
  });
}

void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) {
  const std::string op = "embedding_backward";
  require_shape(dtable, dtable.rows, dout.cols, op, "dtable");
  require_shape(dout, dout.rows, dtable.cols, op, "dout");
  check_tokens(op, tokens, dout.rows, dtable.rows);
  dispatch(common_dtype(op, {dtable, dout}), op, [&](auto t) {
    using T = decltype(t);
    for (std::int64_t i = 0; i < dout.rows; ++i) {
      const T* src = row<T>(dout, i);
      T* dst = row<T>(dtable, tokens[i]);
      for (std::int64_t c = 0; c < dout.cols; ++c) dst[c] = static_cast<T>(dst[c] + src[c]);
    }
  });
}

}  // namespace tinyllama::cpu
