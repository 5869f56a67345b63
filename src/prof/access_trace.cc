#include "prof/access_trace.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <new>

#include "ops/embedding/embedding_chunks.h"
#include "ops/norm/rmsnorm_partials.h"

namespace tinyllama::prof {
namespace {

class NoTimer final : public EventTimer {
 public:
  void record(int) override {}
  double elapsed_ms(int, int) override { return 0.0; }
};

class TracedReadback final : public HostReadback {
 public:
  explicit TracedReadback(AccessTraceBackend& backend) : backend_(backend) {}
  void copy_from(const void* src, std::size_t bytes) override { backend_.record_read(src, bytes); }
  const void* wait() override { return nullptr; }

 private:
  AccessTraceBackend& backend_;
};

}  // namespace

AccessTraceBackend::Recording::Recording(AccessTraceBackend& backend) : previous_(op_observer()) {
  set_op_observer(&backend);
}

AccessTraceBackend::Recording::~Recording() {
  set_op_observer(previous_);
}

AccessTraceBackend::~AccessTraceBackend() {
  for (const Reservation& r : reservations_) munmap(r.base, r.bytes);
}

void AccessTraceBackend::prepare(const ModelConfig& cfg, BatchShape, const StepPlan& plan) {
  workspace_bytes_ = plan.workspace_bytes();
  vocab_ = cfg.vocab_size;
  padded_vocab_ = cfg.padded_vocab();
  sorted_embedding_grad_ = plan.ops.embedding_grad == EmbeddingGradImpl::Sorted;
}

// The head's three GEMMs have the padded vocabulary as one of M (weight
// gradient: dE [P, D]), N (forward: logits [T, P]) or K (data gradient:
// dlogits [T, P] times E [P, D]); that dimension, in the operands that span
// it, counts the vocabulary's rows only.
CallCost AccessTraceBackend::head_gemm_cost(Mat c, Mat a, bool trans_a, Mat b, bool trans_b,
                                            float beta) {
  const std::int64_t p = padded_vocab_;
  const std::int64_t v = vocab_;
  const std::int64_t k = trans_a ? a.rows : a.cols;
  if (c.cols == p) {
    c.cols = v;
    (trans_b ? b.rows : b.cols) = v;
  } else if (k == p) {
    (trans_a ? a.rows : a.cols) = v;
    (trans_b ? b.cols : b.rows) = v;
  } else if (c.rows == p) {
    c.rows = v;
    (trans_a ? a.cols : a.rows) = v;
  }
  return gemm_cost(c, a, trans_a, b, beta);
}

std::unique_ptr<EventTimer> AccessTraceBackend::make_timer(int) {
  return std::make_unique<NoTimer>();
}

std::unique_ptr<HostReadback> AccessTraceBackend::make_readback(std::size_t) {
  return std::make_unique<TracedReadback>(*this);
}

void* AccessTraceBackend::allocate(std::size_t bytes) {
  const std::size_t size = bytes == 0 ? 1 : bytes;
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  reservations_.push_back({p, size});
  return p;
}

void AccessTraceBackend::release(void* p) {
  for (auto it = reservations_.begin(); it != reservations_.end(); ++it) {
    if (it->base == p) {
      munmap(it->base, it->bytes);
      reservations_.erase(it);
      return;
    }
  }
}

int AccessTraceBackend::open(const char* name) {
  std::string path = open_.empty() ? std::string(name) : open_.back().path + "/" + name;
  open_.push_back({std::move(path), -1});
  return static_cast<int>(open_.size()) - 1;
}

void AccessTraceBackend::close(int handle) noexcept {
  if (handle >= 0 && static_cast<std::size_t>(handle) < open_.size()) open_.resize(handle);
}

TracedOp& AccessTraceBackend::current_op() {
  if (open_.empty()) {
    // A call outside every marker: its own op, so nothing is hidden.
    ops_.push_back({"(unmarked)", {}, {}});
    return ops_.back();
  }
  OpenMarker& m = open_.back();
  if (m.op < 0) {
    m.op = static_cast<int>(ops_.size());
    ops_.push_back({m.path, {}, {}});
  }
  return ops_[static_cast<std::size_t>(m.op)];
}

void AccessTraceBackend::record(std::initializer_list<Mat> mats, bool write) {
  TracedOp& op = current_op();
  for (const Mat& m : mats) {
    if (m.empty()) continue;
    const auto es = static_cast<std::int64_t>(dtype_size(m.dtype));
    op.accesses.push_back(
        {static_cast<const char*>(m.data), m.rows, m.cols * es, m.ld * es, write});
  }
}

void AccessTraceBackend::charge(const CallCost& cost) {
  if (charging_) current_op().cost += cost;
}

void AccessTraceBackend::record_read(const void* src, std::size_t bytes) {
  const auto n = static_cast<std::int64_t>(bytes);
  current_op().accesses.push_back({static_cast<const char*>(src), 1, n, n, false});
}

// Each op: its inputs read, then its outputs written (an op that reads its
// output, beta != 0 or in place, lists it among the reads too).
void AccessTraceBackend::convert(Mat dst, Mat src) {
  reads({src});
  writes({dst});
  charge(elementwise_cost({src}, {dst}, 0, dst));
}

void AccessTraceBackend::gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float, float beta) {
  reads({a, b});
  if (beta != 0.0f) reads({c});
  writes({c});
  const bool head =
      padded_vocab_ != vocab_ && current_op().name.find("lm_head") != std::string::npos;
  charge(head ? head_gemm_cost(c, a, trans_a, b, trans_b, beta)
              : gemm_cost(c, a, trans_a, b, beta));
}

void AccessTraceBackend::gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool, Mat c) {
  reads({a, b, c});
  writes({d});
  charge(gemm_add_cost(d, a, trans_a, b, c));
}

void AccessTraceBackend::gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu) {
  charging_ = false;
  Backend::gemm_swiglu_forward(gate_up, hidden, x, w_gu);
  charging_ = true;
  charge(gemm_swiglu_forward_cost(gate_up, hidden, x, w_gu));
}

void AccessTraceBackend::gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                                              Mat gate_up) {
  charging_ = false;
  Backend::gemm_swiglu_backward(d_gate_up, d_hidden, d_out, w_down, gate_up);
  charging_ = true;
  charge(gemm_swiglu_backward_cost(d_gate_up, d_out, w_down, gate_up));
}

void AccessTraceBackend::naive_linear(Mat out, Mat x, Mat w) {
  reads({x, w});
  writes({out});
  charge(gemm_cost(out, x, false, w, 0.0f));
}

void AccessTraceBackend::strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                                      const AttentionShape& shape) {
  reads({q, k, v});
  writes({out, lse});
  charge(attention_forward_cost(out, lse, Mat(), q, k, v, shape));
}

void AccessTraceBackend::attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs,
                                                Mat q, Mat k, Mat v, Mat q_rot, Mat k_rot,
                                                Mat v_copy, const AttentionShape& shape,
                                                double rope_theta) {
  compose_attention_rope_forward(*this, impl, out, lse, probs, q, k, v, q_rot, k_rot, v_copy, shape,
                                 rope_theta);
}

void AccessTraceBackend::add(Mat out, Mat a, Mat b) {
  reads({a, b});
  writes({out});
  charge(elementwise_cost({a, b}, {out}, 1, out));
}

void AccessTraceBackend::mul(Mat out, Mat a, Mat b) {
  reads({a, b});
  writes({out});
  charge(elementwise_cost({a, b}, {out}, 1, out));
}

namespace {

// The table rows that `lookups` ids drawn uniformly from `vocab` (the
// table's rows when 0) touch, in expectation: V (1 - (1 - 1/V)^N), as the
// table's first rows. The synthetic tokens are uniform; text, whose
// frequent tokens repeat, touches fewer. A row looked up twice moves once:
// the forward's second read of a row finds it in L2, and the gradient adds
// each row's occurrences before one read-modify-write of it.
Mat touched_rows(const Mat& table, std::int64_t vocab, std::int64_t lookups) {
  const std::int64_t v = vocab > 0 ? vocab : table.rows;
  if (v <= 0 || lookups <= 0) return table.row_block(0, 0);
  const double n = static_cast<double>(lookups);
  const double rows = -static_cast<double>(v) * std::expm1(n * std::log1p(-1.0 / v));
  return table.row_block(
      0, std::min({lookups, table.rows, static_cast<std::int64_t>(std::llround(rows))}));
}

// RMSNorm's backward: its weight gradient's partial rows, written and read
// back once each.
CallCost partial_sums_cost(const Mat& x) {
  const std::int64_t bytes = rmsnorm_partial_sum_bytes(x.rows, x.cols);
  return read_cost(bytes / 2) + write_cost(bytes / 2);
}

// The loss's int32 targets, one a row of logits.
CallCost targets_cost(const Mat& logits) {
  return read_cost(logits.rows * kTokenBytes);
}

}  // namespace

// A gather of out's rows from the table: the rows touched, then out.
void AccessTraceBackend::embedding_forward(Mat out, const std::int32_t*, Mat table) {
  reads({table});
  writes({out});
  charge(elementwise_cost({touched_rows(table, vocab_, out.rows)}, {out}, 0, out) +
         read_cost(out.rows * kTokenBytes));
}

// A scatter-add: dout read once, each touched row of the table gradient
// read and written once; the sorted form also writes and reads back its
// runs' partial sums where they cross chunks (embedding_chunks.h). Not
// counted: the sort of the ids (8 bytes a position a pass).
void AccessTraceBackend::embedding_backward(Mat dtable, const std::int32_t*, Mat dout) {
  reads({dout, dtable});
  writes({dtable});
  const Mat rows = touched_rows(dtable, vocab_, dout.rows);
  CallCost cost =
      elementwise_cost({dout, rows}, {rows}, 1, dout) + read_cost(dout.rows * kTokenBytes);
  if (sorted_embedding_grad_) {
    const auto partial_bytes = static_cast<std::int64_t>(
        std::llround(embedding_partial_rows(dout.rows, static_cast<double>(rows.rows)) *
                     static_cast<double>(dtable.cols) * sizeof(float)));
    cost += read_cost(partial_bytes) + write_cost(partial_bytes);
  }
  charge(cost);
}

void AccessTraceBackend::rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double) {
  reads({x, weight});
  writes({out, rstd});
  charge(elementwise_cost({x, weight}, {out, rstd}, kRmsNormForwardFlops, x));
}

void AccessTraceBackend::rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight,
                                          Mat rstd) {
  reads({dout, x, weight, rstd});
  writes({dx, dweight});
  CallCost cost =
      elementwise_cost({dout, x, weight, rstd}, {dx, dweight}, kRmsNormBackwardFlops, x);
  cost += partial_sums_cost(x);
  charge(cost);
}

void AccessTraceBackend::add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                                             double) {
  reads({a, b, weight});
  writes({sum, out, rstd});
  charge(elementwise_cost({a, b, weight}, {sum, out, rstd}, kRmsNormForwardFlops + 1, a));
}

void AccessTraceBackend::rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight,
                                              Mat rstd, Mat dresidual) {
  reads({dout, x, weight, rstd, dresidual});
  writes({dx, dweight});
  CallCost cost = elementwise_cost({dout, x, weight, rstd, dresidual}, {dx, dweight},
                                   kRmsNormBackwardFlops + 1, x);
  cost += partial_sums_cost(x);
  charge(cost);
}

// Two multiplies an element.
void AccessTraceBackend::rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) {
  reads({x, weight, rstd});
  writes({out});
  charge(elementwise_cost({x, weight, rstd}, {out}, 2, x));
}

void AccessTraceBackend::rope_forward(Mat x, int, int, double) {
  reads({x});
  writes({x});
  charge(elementwise_cost({x}, {x}, kRopeFlops, x));
}

void AccessTraceBackend::rope_backward(Mat dx, int, int, double) {
  reads({dx});
  writes({dx});
  charge(elementwise_cost({dx}, {dx}, kRopeFlops, dx));
}

void AccessTraceBackend::attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q,
                                           Mat k, Mat v, const AttentionShape& shape) {
  require_probs_match(impl, probs, "trace attention_forward");
  reads({q, k, v});
  writes({out, lse, probs});
  charge(attention_forward_cost(out, lse, probs, q, k, v, shape));
}

void AccessTraceBackend::attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout,
                                            Mat q, Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                            const AttentionShape& shape) {
  require_probs_match(impl, probs, "trace attention_backward");
  reads({dout, q, k, v, out, lse, probs});
  writes({dq, dk, dv});
  charge(attention_backward_cost(dq, dk, dv, dout, q, k, v, out, lse, probs, shape));
}

// The rotation's few nominal FLOPs are left out: attention's are model work.
void AccessTraceBackend::attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv,
                                                 Mat dout, Mat q, Mat k, Mat v, Mat out, Mat lse,
                                                 Mat probs, const AttentionShape& shape, double) {
  attention_backward(impl, dq, dk, dv, dout, q, k, v, out, lse, probs, shape);
  charge({0, rope_table_read_bytes(shape), 0, OpKind::Attention});
}

void AccessTraceBackend::silu_forward(Mat out, Mat x) {
  reads({x});
  writes({out});
  charge(elementwise_cost({x}, {out}, kSiluForwardFlops, x));
}

void AccessTraceBackend::silu_backward(Mat dx, Mat dout, Mat x) {
  reads({dout, x});
  writes({dx});
  charge(elementwise_cost({dout, x}, {dx}, kSiluBackwardFlops, x));
}

void AccessTraceBackend::swiglu_forward(Mat out, Mat gate, Mat up) {
  reads({gate, up});
  writes({out});
  charge(elementwise_cost({gate, up}, {out}, kSwigluForwardFlops, out));
}

void AccessTraceBackend::swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) {
  reads({dout, gate, up});
  writes({dgate, dup});
  charge(elementwise_cost({dout, gate, up}, {dgate, dup}, kSwigluBackwardFlops, dout));
}

void AccessTraceBackend::cross_entropy_forward(Mat losses, Mat logits, const std::int32_t*) {
  reads({logits});
  writes({losses});
  charge(elementwise_cost({logits}, {losses}, kCrossEntropyFlops, logits) + targets_cost(logits));
}

void AccessTraceBackend::cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t*,
                                                float) {
  reads({logits});
  writes({dlogits});
  charge(elementwise_cost({logits}, {dlogits}, kCrossEntropyFlops, logits) + targets_cost(logits));
}

void AccessTraceBackend::cross_entropy_backward(Mat dlogits, Mat logits,
                                                const std::int32_t* targets, const StepScalars*) {
  cross_entropy_backward(dlogits, logits, targets, 1.0f);
}

void AccessTraceBackend::cross_entropy_fused(Mat losses, Mat logits, const std::int32_t*,
                                             const StepScalars*) {
  reads({logits});
  writes({losses, logits});
  charge(cross_entropy_fused_cost(losses, logits));
}

void AccessTraceBackend::adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper&) {
  reads({param, grad, m, v});
  writes({param, m, v});
  charge(adamw_cost(param, Mat()));
}

void AccessTraceBackend::adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                     const AdamWHyper&) {
  reads({param, grad, m, v});
  writes({param, m, v, compute_copy});
  charge(adamw_cost(param, compute_copy));
}

// Reads x; the flag's word is written at most once.
void AccessTraceBackend::flag_nonfinite(Mat x, std::int32_t*) {
  reads({x});
  charge(elementwise_cost({x}, {}, 1, x) + write_cost(sizeof(std::int32_t)));
}

void AccessTraceBackend::sum_squares(Mat x, double*) {
  reads({x});
  charge(elementwise_cost({x}, {}, kSumSquaresFlops, x));
}

void AccessTraceBackend::clip_by_norm(const double*, double, StepScalars*, float*) {}

}  // namespace tinyllama::prof
