#pragma once
// What one backend call computes and moves, in the profiler's terms: each op
// family states its calls' FLOPs and bytes beside its kernels
// (ops/<family>/*_cost.h), from the call's own operands; the access-trace
// backend charges every call it records (prof/access_trace.h), so a step's
// cost is the recorded op sequence's (prof/cost_model.h has the
// conventions). This file holds what the families share.
#include <cstdint>
#include <initializer_list>

#include "core/mat.h"

namespace tinyllama::prof {

enum class OpKind { Gemm, Attention, Elementwise, Optimizer };

const char* op_kind_name(OpKind kind);  // "gemm", "attention", ...

struct CallCost {
  std::int64_t flops = 0;
  std::int64_t bytes = 0;  // read + written
  int gemms = 0;           // GEMM launches (a split projection runs several)
  OpKind kind = OpKind::Elementwise;
  // Of `bytes`, those written: reads and writes are checked against the
  // hardware apart, as L2 holds a kernel's writes past its end.
  std::int64_t write_bytes = 0;

  std::int64_t read_bytes() const { return bytes - write_bytes; }
};

// A call's bytes beside its operands': only read (token ids), only written
// (the codes a producer stores as it computes).
CallCost read_cost(std::int64_t bytes);
CallCost write_cost(std::int64_t bytes);

inline constexpr std::int64_t kTokenBytes = 4;  // int32 token ids and targets

// Bytes of a Mat's elements (its view, not its stride), and of several.
std::int64_t mat_bytes(const Mat& m);
std::int64_t mat_bytes(std::initializer_list<Mat> mats);

// The sum of the calls' costs; the op's kind is the weightiest of its calls'
// (a GEMM op with a conversion after it stays a GEMM op).
CallCost& operator+=(CallCost& a, const CallCost& b);
inline CallCost operator+(CallCost a, const CallCost& b) {
  return a += b;
}

// Reads the inputs, writes the outputs, `flops_per` FLOPs per element of
// `work` (an elementwise op's nominal count: enough to place it on the
// roofline, far left of the ridge, never counted as model work).
CallCost elementwise_cost(std::initializer_list<Mat> reads, std::initializer_list<Mat> writes,
                          std::int64_t flops_per, const Mat& work);

}  // namespace tinyllama::prof
