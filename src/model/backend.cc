// Defaults for backends without whole-step graphs: asking one to capture is
// a programming error (callers check supports_graphs() first). The fused
// optimizer sweep as the composition of its primitives, the reference; and
// side GEMMs that run at once, in order.
#include "model/backend.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.h"

namespace tinyllama {

void require_probs_match(AttentionImpl impl, Mat probs, const char* op) {
  const bool materialized = impl == AttentionImpl::Materialized;
  if (materialized == probs.empty()) {
    throw std::invalid_argument(std::string(op) + ": " + impl_name(impl) + " attention " +
                                (materialized ? "needs" : "takes no") + " probs buffer");
  }
}

void Backend::begin_capture() {
  throw RuntimeFailure("the " + name() + " backend cannot capture graphs");
}

GraphStats Backend::end_capture(bool /*instantiate*/, int /*slot*/) {
  throw RuntimeFailure("the " + name() + " backend cannot capture graphs");
}

void Backend::adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                          const AdamWHyper& hp) {
  adamw(param, grad, m, v, hp);
  if (!compute_copy.empty()) convert(compute_copy, param);
}

std::int64_t Backend::side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                       const AdamWHyper& hp) {
  join_side_gemms();  // the weight gradients it reads are complete first
  adamw_fused(param, grad, m, v, compute_copy, hp);
  return 0;
}

void Backend::gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool trans_b, Mat c) {
  if (d.data == c.data) {
    gemm(d, a, trans_a, b, trans_b, 1.0f, 1.0f);
    return;
  }
  gemm(d, a, trans_a, b, trans_b, 1.0f, 0.0f);
  add(d, d, c);
}

void Backend::gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu) {
  const std::int64_t f = hidden.cols;
  gemm(gate_up, x, false, w_gu, true, 1.0f, 0.0f);
  swiglu_forward(hidden, gate_up.col_block(0, f), gate_up.col_block(f, f));
}

void Backend::gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                                   Mat gate_up) {
  const std::int64_t f = d_hidden.cols;
  gemm(d_hidden, d_out, false, w_down, false, 1.0f, 0.0f);
  swiglu_backward(d_gate_up.col_block(0, f), d_gate_up.col_block(f, f), d_hidden,
                  gate_up.col_block(0, f), gate_up.col_block(f, f));
}

std::int64_t Backend::side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                float beta) {
  gemm(c, a, trans_a, b, trans_b, alpha, beta);
  return 0;
}

std::int64_t Backend::side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b,
                                          float alpha, float beta) {
  return side_gemm(c, a, trans_a, b, trans_b, alpha, beta);
}

void Backend::replay(int /*slot*/) {
  throw RuntimeFailure("the " + name() + " backend has no captured graph to replay");
}

namespace {

// For backends whose host exchange is cheap or already synchronous: the
// bytes are copied when asked for.
class SyncReadback final : public HostReadback {
 public:
  SyncReadback(Backend& backend, std::size_t bytes) : backend_(backend), bytes_(bytes) {}
  void copy_from(const void* src, std::size_t bytes) override {
    if (bytes > bytes_.size()) throw RuntimeFailure("readback: more bytes than it holds");
    backend_.download(bytes_.data(), src, bytes);
  }
  const void* wait() override { return bytes_.data(); }

 private:
  Backend& backend_;
  std::vector<char> bytes_;
};

}  // namespace

std::unique_ptr<HostReadback> Backend::make_readback(std::size_t bytes) {
  return std::make_unique<SyncReadback>(*this, bytes);
}

void Backend::naive_linear(Mat, Mat, Mat) {
  throw RuntimeFailure("--inject naive-swiglu: the " + name() + " backend has no naive kernel");
}

void Backend::strided_kv_attention_forward(Mat, Mat, Mat, Mat, Mat, const AttentionShape&) {
  throw RuntimeFailure("--inject noncontiguous-kv: the " + name() +
                       " backend has no strided attention kernel");
}

void Backend::attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k,
                                     Mat v, Mat q_rot, Mat k_rot, Mat v_copy,
                                     const AttentionShape& shape, double rope_theta) {
  convert(q_rot, q);
  convert(k_rot, k);
  convert(v_copy, v);
  rope_forward(q_rot, shape.seq, shape.head_dim, rope_theta);
  rope_forward(k_rot, shape.seq, shape.head_dim, rope_theta);
  attention_forward(impl, out, lse, probs, q_rot, k_rot, v_copy, shape);
}

void Backend::attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                                      Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                      const AttentionShape& shape, double rope_theta) {
  attention_backward(impl, dq, dk, dv, dout, q, k, v, out, lse, probs, shape);
  rope_backward(dq, shape.seq, shape.head_dim, rope_theta);
  rope_backward(dk, shape.seq, shape.head_dim, rope_theta);
}

}  // namespace tinyllama
