// The fast CPU attention (fp32): the same causal GQA attention as
// cpu_attention.cc, with its four matrix products per (batch, head) as BLAS
// GEMMs on [S, S] score blocks instead of one dot product at a time. Tasks
// run on parallel_for's threads, each GEMM single-threaded inside its task
// (blas_gemm_serial). Sums run in fp32 in BLAS's order, as on the GPU; the
// reference keeps double.
//
// Forward, per (b, h):  S = scale Q Kᵀ, P = softmax over j <= i (zero
// above the diagonal), lse_i = log sum_j exp(S_ij), O = P V.
// Backward, per (b, kv head) so that one task owns the dK and dV rows it
// writes, over the group's query heads in order: P from probs or from lse,
// dP = dO Vᵀ, D_i = sum_j P_ij dP_ij, dS = P ∘ (dP − D), dK (+)= scale dSᵀ Q,
// dV (+)= Pᵀ dO, dQ = scale dS K; the group's first head overwrites dK and
// dV, the others add to them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_common.h"
#include "ops/attention/cpu_attention.h"
#include "ops/linear/cpu_blas.h"

namespace tinyllama::cpu {
namespace {

struct Views {
  std::int64_t seq, hd, group;
  // Rows of batch b, columns of head h: a [S, hd] view with the buffer's stride.
  Mat head(const Mat& m, std::int64_t b, std::int64_t h) const {
    return m.row_block(b * seq, seq).col_block(h * hd, hd);
  }
};

// Softmax of the causal scores in place (row i over columns j <= i), the
// row's log-sum-exp into lse[i]; zeros above the diagonal.
void causal_softmax(const Mat& s, float* lse) {
  for (std::int64_t i = 0; i < s.rows; ++i) {
    float* r = row<float>(s, i);
    float max_s = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j <= i; ++j) max_s = std::max(max_s, r[j]);
    double sum = 0;
    for (std::int64_t j = 0; j <= i; ++j) sum += std::exp(r[j] - max_s);
    const auto row_lse = static_cast<float>(max_s + std::log(sum));
    for (std::int64_t j = 0; j <= i; ++j) r[j] = std::exp(r[j] - row_lse);
    std::fill(r + i + 1, r + s.cols, 0.0f);
    lse[i] = row_lse;
  }
}

// P from the scores and the saved log-sum-exp, like a flash backward pass.
void probs_from_lse(const Mat& s, const float* lse) {
  for (std::int64_t i = 0; i < s.rows; ++i) {
    float* r = row<float>(s, i);
    for (std::int64_t j = 0; j <= i; ++j) r[j] = std::exp(r[j] - lse[i]);
    std::fill(r + i + 1, r + s.cols, 0.0f);
  }
}

// dS = P ∘ (dP − D) in place of dP, D_i = sum_j P_ij dP_ij summed in double.
void softmax_backward(const Mat& p, const Mat& dp) {
  for (std::int64_t i = 0; i < p.rows; ++i) {
    const float* pr = row<float>(p, i);
    float* r = row<float>(dp, i);
    double d = 0;
    for (std::int64_t j = 0; j <= i; ++j) d += static_cast<double>(pr[j]) * r[j];
    const auto df = static_cast<float>(d);
    for (std::int64_t j = 0; j <= i; ++j) r[j] = pr[j] * (r[j] - df);
    std::fill(r + i + 1, r + p.cols, 0.0f);
  }
}

void check_dtypes(const std::string& op, Mat probs, std::initializer_list<Mat> mats) {
  require(common_dtype(op, mats) == DType::F32, op, "the BLAS attention takes float32 only");
  require(probs.empty() || probs.dtype == DType::F32, op, "probs must be float32");
}

float softmax_scale(const AttentionShape& s) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

}  // namespace

void attention_forward_blas(Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                            const AttentionShape& s) {
  const std::string op = "attention_forward";
  check_attention_shapes(op, s, q, k, v, lse, probs);
  require_shape(out, q.rows, q.cols, op, "out");
  check_dtypes(op, probs, {out, lse, q, k, v});
  const Views g{s.seq, s.head_dim, s.heads / s.kv_heads};
  const float scale = softmax_scale(s);
  const double flops_per_task = 4.0 * static_cast<double>(g.seq * g.seq * g.hd);
  parallel_for(
      std::int64_t{s.batch} * s.heads, flops_per_task, [&](std::int64_t t0, std::int64_t t1) {
        std::vector<float> scores(static_cast<std::size_t>(g.seq * g.seq));
        const Mat sm(scores.data(), DType::F32, g.seq, g.seq);
        for (std::int64_t bh = t0; bh < t1; ++bh) {
          const std::int64_t b = bh / s.heads;
          const std::int64_t h = bh % s.heads;
          const std::int64_t kvh = h / g.group;
          // With probs, the scores are computed where P is kept.
          const Mat p = probs.empty() ? sm : probs.row_block(bh * g.seq, g.seq);
          blas_gemm_serial(p, g.head(q, b, h), false, g.head(k, b, kvh), true, scale, 0.0f);
          causal_softmax(p, row<float>(lse, bh));
          blas_gemm_serial(g.head(out, b, h), p, false, g.head(v, b, kvh), false, 1.0f, 0.0f);
        }
      });
}

void attention_backward_blas(Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat lse,
                             Mat probs, const AttentionShape& s) {
  const std::string op = "attention_backward";
  check_attention_shapes(op, s, q, k, v, lse, probs);
  require_shape(dq, q.rows, q.cols, op, "dq");
  require_shape(dout, q.rows, q.cols, op, "dout");
  require_shape(dk, k.rows, k.cols, op, "dk");
  require_shape(dv, v.rows, v.cols, op, "dv");
  check_dtypes(op, probs, {dq, dk, dv, dout, q, k, v, lse});
  const Views g{s.seq, s.head_dim, s.heads / s.kv_heads};
  const float scale = softmax_scale(s);
  const double flops_per_task = 10.0 * static_cast<double>(g.group * g.seq * g.seq * g.hd);
  parallel_for(std::int64_t{s.batch} * s.kv_heads, flops_per_task,
               [&](std::int64_t t0, std::int64_t t1) {
                 const auto block = static_cast<std::size_t>(g.seq * g.seq);
                 std::vector<float> p_buf(probs.empty() ? block : 0), dp_buf(block);
                 const Mat dpm(dp_buf.data(), DType::F32, g.seq, g.seq);
                 for (std::int64_t task = t0; task < t1; ++task) {
                   const std::int64_t b = task / s.kv_heads;
                   const std::int64_t kvh = task % s.kv_heads;
                   const Mat kh = g.head(k, b, kvh), vh = g.head(v, b, kvh);
                   for (std::int64_t h = kvh * g.group; h < (kvh + 1) * g.group; ++h) {
                     const std::int64_t bh = b * s.heads + h;
                     const float beta = h == kvh * g.group ? 0.0f : 1.0f;
                     const Mat qh = g.head(q, b, h), doh = g.head(dout, b, h);
                     Mat p;
                     if (probs.empty()) {
                       p = Mat(p_buf.data(), DType::F32, g.seq, g.seq);
                       blas_gemm_serial(p, qh, false, kh, true, scale, 0.0f);
                       probs_from_lse(p, row<float>(lse, bh));
                     } else {
                       p = probs.row_block(bh * g.seq, g.seq);
                     }
                     blas_gemm_serial(dpm, doh, false, vh, true, 1.0f, 0.0f);
                     softmax_backward(p, dpm);
                     blas_gemm_serial(g.head(dk, b, kvh), dpm, true, qh, false, scale, beta);
                     blas_gemm_serial(g.head(dv, b, kvh), p, true, doh, false, 1.0f, beta);
                     blas_gemm_serial(g.head(dq, b, h), dpm, false, kh, false, scale, 0.0f);
                   }
                 }
               });
}

}  // namespace tinyllama::cpu
