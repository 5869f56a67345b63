// The FP8 ops' accesses and costs (access_trace.h): the casts, the
// scale update, the FP8 GEMMs, and the producers that write FP8 codes as
// the CUDA backend runs them (one pass where the scale is known before it,
// else the op and the cast).
#include "prof/access_trace.h"

namespace tinyllama::prof {

void AccessTraceBackend::record_fp8(const Fp8Tensor& q, bool direct, bool transposed, bool write) {
  TracedOp& op = current_op();
  if (direct && q.codes != nullptr) {
    op.accesses.push_back({reinterpret_cast<const char*>(q.codes), q.rows, q.cols, q.ld, write});
  }
  if (transposed && q.codes_t != nullptr) {
    op.accesses.push_back(
        {reinterpret_cast<const char*>(q.codes_t), q.cols, q.rows, q.ld_t, write});
  }
  const std::int64_t scalar_bytes = kFp8Scalars * static_cast<std::int64_t>(sizeof(float));
  op.accesses.push_back(
      {reinterpret_cast<const char*>(q.scalars), 1, scalar_bytes, scalar_bytes, write});
}

// Amax (a pass over x, unless the scale is kept), then the casts: x read
// once per pass, a byte written per element per copy.
void AccessTraceBackend::quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) {
  reads({x});
  if (from == Fp8ScaleFrom::Amax) {
    record_fp8(q, false, false, true);  // amax, scale and inverse written
    reads({x});                         // the cast's pass
  }
  record_fp8(q, false, false, from == Fp8ScaleFrom::History);  // the scale read (amax raised)
  record_fp8(q, true, true, true);
  const std::int64_t copies = (q.codes != nullptr ? 1 : 0) + (q.codes_t != nullptr ? 1 : 0);
  charge(read_cost(mat_bytes(x) * (from == Fp8ScaleFrom::Amax ? 2 : 1)) +
         write_cost(copies * q.rows * q.cols));
}

// One thread per block: the blocks read and written, no pass over data.
void AccessTraceBackend::fp8_update_scales(float* blocks, int count, Fp8Format) {
  const std::int64_t bytes = std::int64_t{count} * kFp8Block * std::int64_t{sizeof(float)};
  const auto* p = reinterpret_cast<const char*>(blocks);
  TracedOp& op = current_op();  // once: outside every marker each call opens an op
  op.accesses.push_back({p, 1, bytes, bytes, false});
  op.accesses.push_back({p, 1, bytes, bytes, true});
  charge(read_cost(bytes) + write_cost(bytes));
}

namespace {

// An FP8 GEMM writing `out` from a's and b's codes, reading `addend` (none:
// an empty Mat) as its C.
CallCost fp8_gemm_cost(Mat out, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, Mat addend) {
  CallCost cost;
  cost.flops = 2 * out.rows * out.cols * (trans_a ? a.rows : a.cols);
  cost.write_bytes = mat_bytes(out);
  cost.bytes = a.rows * a.cols + b.rows * b.cols + mat_bytes(addend) + cost.write_bytes;
  cost.gemms = 1;
  cost.kind = OpKind::Gemm;
  return cost;
}

}  // namespace

void AccessTraceBackend::gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                                  bool trans_b, bool accumulate) {
  record_fp8(a, !trans_a, trans_a, false);
  record_fp8(b, trans_b, !trans_b, false);
  if (accumulate) reads({c});
  writes({c});
  charge(fp8_gemm_cost(c, a, trans_a, b, accumulate ? c : Mat()));
}

// One GEMM reading c (cuBLASLt's C) and writing d, as the CUDA backend runs it.
void AccessTraceBackend::gemm_fp8_add(Mat d, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                                      bool trans_b, Mat c) {
  record_fp8(a, !trans_a, trans_a, false);
  record_fp8(b, trans_b, !trans_b, false);
  reads({c});
  writes({d});
  charge(fp8_gemm_cost(d, a, trans_a, b, c));
}

// The codes a producer writes as it computes (Kept or History scales): the
// scale read (the amax raised), a byte per element per copy.
void AccessTraceBackend::record_fused_cast(const Fp8Tensor& q, Fp8ScaleFrom from) {
  record_fp8(q, false, false, from == Fp8ScaleFrom::History);
  record_fp8(q, true, true, true);
  const std::int64_t copies = (q.codes != nullptr ? 1 : 0) + (q.codes_t != nullptr ? 1 : 0);
  charge(write_cost(copies * q.rows * q.cols));
}

void AccessTraceBackend::rmsnorm_forward_fp8(Mat out, Mat rstd, Mat x, Mat weight, double eps,
                                             const Fp8Tensor& q, Fp8ScaleFrom from, bool keep_out) {
  if (from == Fp8ScaleFrom::Amax || q.codes_t != nullptr) {
    Backend::rmsnorm_forward_fp8(out, rstd, x, weight, eps, q, from, keep_out);
    return;
  }
  reads({x, weight});
  writes({rstd});
  if (keep_out) writes({out});
  CallCost cost = elementwise_cost({x, weight}, {rstd}, kRmsNormForwardFlops, x);
  if (keep_out) cost += write_cost(mat_bytes(out));
  charge(cost);
  record_fused_cast(q, from);
}

void AccessTraceBackend::rmsnorm_apply_fp8(Mat out, Mat x, Mat weight, Mat rstd, const Fp8Tensor& q,
                                           Fp8ScaleFrom from, bool keep_out) {
  if (from == Fp8ScaleFrom::Amax) {
    Backend::rmsnorm_apply_fp8(out, x, weight, rstd, q, from, keep_out);
    return;
  }
  reads({x, weight, rstd});
  if (keep_out) writes({out});
  CallCost cost = elementwise_cost({x, weight, rstd}, {}, 2, x);
  if (keep_out) cost += write_cost(mat_bytes(out));
  charge(cost);
  record_fused_cast(q, from);
}

void AccessTraceBackend::swiglu_forward_fp8(Mat hidden, Mat gate, Mat up, const Fp8Tensor& q,
                                            Fp8ScaleFrom from, bool keep_hidden) {
  if (from == Fp8ScaleFrom::Amax && !hidden.empty()) {
    Backend::swiglu_forward_fp8(hidden, gate, up, q, from, keep_hidden);
    return;
  }
  // With no bf16 buffer (Fp8Linears::swiglu_keeps_codes) the CUDA backend
  // takes a fresh amax in a pass of its own over the same inputs.
  const int passes = from == Fp8ScaleFrom::Amax ? 2 : 1;
  for (int p = 0; p < passes; ++p) {
    reads({gate, up});
    charge(elementwise_cost({gate, up}, {}, kSwigluForwardFlops, hidden));
  }
  if (keep_hidden) {
    writes({hidden});
    charge(write_cost(mat_bytes(hidden)));
  }
  record_fused_cast(q, from);
}

void AccessTraceBackend::swiglu_backward_fp8(Mat d_gate_up, Mat dout, Mat gate, Mat up,
                                             const Fp8Tensor& q, Fp8ScaleFrom from,
                                             bool keep_grads) {
  if (from == Fp8ScaleFrom::Amax && !d_gate_up.empty()) {
    Backend::swiglu_backward_fp8(d_gate_up, dout, gate, up, q, from, keep_grads);
    return;
  }
  // With no bf16 buffer (Fp8Linears::swiglu_grad_codes_only) the CUDA
  // backend takes a fresh amax in a pass of its own over the same inputs.
  const int passes = from == Fp8ScaleFrom::Amax ? 2 : 1;
  for (int p = 0; p < passes; ++p) {
    reads({dout, gate, up});
    charge(elementwise_cost({dout, gate, up}, {}, kSwigluBackwardFlops, dout));
  }
  if (keep_grads) {
    writes({d_gate_up});
    charge(write_cost(mat_bytes(d_gate_up)));
  }
  record_fused_cast(q, from);
}

}  // namespace tinyllama::prof
