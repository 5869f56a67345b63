#include "ops/op_cost.h"

namespace tinyllama::prof {

namespace {

// The order of weight when calls of several kinds make one op.
int weight(OpKind k) {
  switch (k) {
    case OpKind::Gemm:
      return 3;
    case OpKind::Attention:
      return 2;
    case OpKind::Optimizer:
      return 1;
    case OpKind::Elementwise:
      break;
  }
  return 0;
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Gemm:
      return "gemm";
    case OpKind::Attention:
      return "attention";
    case OpKind::Elementwise:
      return "elementwise";
    case OpKind::Optimizer:
      return "optimizer";
  }
  return "?";
}

std::int64_t mat_bytes(const Mat& m) {
  return m.empty() ? 0 : m.rows * m.cols * static_cast<std::int64_t>(dtype_size(m.dtype));
}

std::int64_t mat_bytes(std::initializer_list<Mat> mats) {
  std::int64_t b = 0;
  for (const Mat& m : mats) b += mat_bytes(m);
  return b;
}

CallCost& operator+=(CallCost& a, const CallCost& b) {
  a.flops += b.flops;
  a.bytes += b.bytes;
  a.write_bytes += b.write_bytes;
  a.gemms += b.gemms;
  if (weight(b.kind) > weight(a.kind)) a.kind = b.kind;
  return a;
}

CallCost elementwise_cost(std::initializer_list<Mat> reads, std::initializer_list<Mat> writes,
                          std::int64_t flops_per, const Mat& work) {
  CallCost cost;
  cost.flops = flops_per * work.rows * work.cols;
  cost.write_bytes = mat_bytes(writes);
  cost.bytes = mat_bytes(reads) + cost.write_bytes;
  return cost;
}

CallCost read_cost(std::int64_t bytes) {
  CallCost cost;
  cost.bytes = bytes;
  return cost;
}

CallCost write_cost(std::int64_t bytes) {
  CallCost cost;
  cost.bytes = bytes;
  cost.write_bytes = bytes;
  return cost;
}

}  // namespace tinyllama::prof
