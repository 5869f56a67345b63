// Causal grouped-query attention, scale 1/sqrt(hd), written as the textbook
// softmax(Q K^T * scale) V per (batch, head), one query row at a time.
//
// Layout: q/out rows are b*S + s with head h in columns [h*hd, (h+1)*hd);
// k/v likewise with K heads; query head h reads kv head h / (H/K). lse is
// [B*H, S]; probs, when given, is [B*H*S, S] with zeros above the diagonal.
//
// Backward, per query row i with P the softmax row and g = dout_i:
//   dP_j = g . v_j,  D = sum_j P_j dP_j,  dS_j = P_j (dP_j - D)
//   dq_i = scale sum_j dS_j k_j,  dk_j += scale dS_j q_i,  dv_j += P_j g
// P comes from probs when given, else from the saved lse, exactly like a
// flash kernel recomputes it. Work is split over (batch, kv head) so that
// one task owns the dk/dv rows it accumulates: sums run in a fixed order
// whatever the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_common.h"
#include "ops/attention/cpu_attention.h"

namespace tinyllama::cpu {
namespace {

struct Geometry {
  std::int64_t batch, seq, heads, kv_heads, hd, group;
  double scale;

  explicit Geometry(const AttentionShape& s)
      : batch(s.batch),
        seq(s.seq),
        heads(s.heads),
        kv_heads(s.kv_heads),
        hd(s.head_dim),
        group(s.kv_heads > 0 ? s.heads / s.kv_heads : 0),
        scale(1.0 / std::sqrt(static_cast<double>(s.head_dim))) {}

  // Head slice of token s of batch b in a [B*S, n_heads*hd] Mat.
  template <typename T>
  T* head(const Mat& m, std::int64_t b, std::int64_t s, std::int64_t h) const {
    return row<T>(m, b * seq + s) + h * hd;
  }
};

template <typename T>
double dot(const T* a, const T* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t d = 0; d < n; ++d) s += static_cast<double>(a[d]) * b[d];
  return s;
}

template <typename T>
void forward_impl(Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v, const Geometry& g) {
  const double flops_per_task = 4.0 * static_cast<double>(g.seq * g.seq * g.hd) / 2;
  parallel_for(g.batch * g.heads, flops_per_task, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<double> p(static_cast<std::size_t>(g.seq));
    std::vector<double> o(static_cast<std::size_t>(g.hd));
    for (std::int64_t task = t0; task < t1; ++task) {
      const std::int64_t b = task / g.heads;
      const std::int64_t h = task % g.heads;
      const std::int64_t kvh = h / g.group;
      for (std::int64_t i = 0; i < g.seq; ++i) {
        const T* qi = g.head<T>(q, b, i, h);
        double max_s = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j <= i; ++j) {
          p[j] = g.scale * dot(qi, g.head<T>(k, b, j, kvh), g.hd);
          max_s = std::max(max_s, p[j]);
        }
        double sum = 0;
        for (std::int64_t j = 0; j <= i; ++j) sum += std::exp(p[j] - max_s);
        const double row_lse = max_s + std::log(sum);
        row<T>(lse, b * g.heads + h)[i] = static_cast<T>(row_lse);
        for (std::int64_t j = 0; j <= i; ++j) p[j] = std::exp(p[j] - row_lse);

        std::fill(o.begin(), o.end(), 0.0);
        for (std::int64_t j = 0; j <= i; ++j) {
          const T* vj = g.head<T>(v, b, j, kvh);
          for (std::int64_t d = 0; d < g.hd; ++d) o[d] += p[j] * vj[d];
        }
        T* oi = g.head<T>(out, b, i, h);
        for (std::int64_t d = 0; d < g.hd; ++d) oi[d] = static_cast<T>(o[d]);

        if (!probs.empty()) {
          T* pr = row<T>(probs, (b * g.heads + h) * g.seq + i);
          for (std::int64_t j = 0; j < g.seq; ++j) pr[j] = j <= i ? static_cast<T>(p[j]) : T(0);
        }
      }
    }
  });
}

template <typename T>
void backward_impl(Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat lse, Mat probs,
                   const Geometry& g) {
  const double flops_per_task = 8.0 * static_cast<double>(g.group * g.seq * g.seq * g.hd) / 2;
  parallel_for(g.batch * g.kv_heads, flops_per_task, [&](std::int64_t t0, std::int64_t t1) {
    const auto span = static_cast<std::size_t>(g.seq * g.hd);
    std::vector<double> dk_acc(span), dv_acc(span);
    std::vector<double> p(static_cast<std::size_t>(g.seq)), ds(static_cast<std::size_t>(g.seq));
    std::vector<double> dqi(static_cast<std::size_t>(g.hd));
    for (std::int64_t task = t0; task < t1; ++task) {
      const std::int64_t b = task / g.kv_heads;
      const std::int64_t kvh = task % g.kv_heads;
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0);
      for (std::int64_t h = kvh * g.group; h < (kvh + 1) * g.group; ++h) {
        for (std::int64_t i = 0; i < g.seq; ++i) {
          const T* qi = g.head<T>(q, b, i, h);
          const T* gi = g.head<T>(dout, b, i, h);
          if (probs.empty()) {
            const double row_lse = row<T>(lse, b * g.heads + h)[i];
            for (std::int64_t j = 0; j <= i; ++j) {
              p[j] = std::exp(g.scale * dot(qi, g.head<T>(k, b, j, kvh), g.hd) - row_lse);
            }
          } else {
            const T* pr = row<T>(probs, (b * g.heads + h) * g.seq + i);
            for (std::int64_t j = 0; j <= i; ++j) p[j] = pr[j];
          }
          double big_d = 0;
          for (std::int64_t j = 0; j <= i; ++j) {
            ds[j] = dot(gi, g.head<T>(v, b, j, kvh), g.hd);  // dP_j for now
            big_d += p[j] * ds[j];
          }
          std::fill(dqi.begin(), dqi.end(), 0.0);
          for (std::int64_t j = 0; j <= i; ++j) {
            ds[j] = p[j] * (ds[j] - big_d);
            const T* kj = g.head<T>(k, b, j, kvh);
            double* dkj = dk_acc.data() + j * g.hd;
            double* dvj = dv_acc.data() + j * g.hd;
            for (std::int64_t d = 0; d < g.hd; ++d) {
              dqi[d] += ds[j] * kj[d];
              dkj[d] += g.scale * ds[j] * qi[d];
              dvj[d] += p[j] * gi[d];
            }
          }
          T* dq_out = g.head<T>(dq, b, i, h);
          for (std::int64_t d = 0; d < g.hd; ++d) dq_out[d] = static_cast<T>(g.scale * dqi[d]);
        }
      }
      for (std::int64_t j = 0; j < g.seq; ++j) {
        T* dkj = g.head<T>(dk, b, j, kvh);
        T* dvj = g.head<T>(dv, b, j, kvh);
        for (std::int64_t d = 0; d < g.hd; ++d) {
          dkj[d] = static_cast<T>(dk_acc[j * g.hd + d]);
          dvj[d] = static_cast<T>(dv_acc[j * g.hd + d]);
        }
      }
    }
  });
}

// The empty probs Mat carries no meaningful dtype, so it joins the dtype
// check only when present.
DType attention_dtype(const std::string& op, Mat probs, std::initializer_list<Mat> mats) {
  const DType t = common_dtype(op, mats);
  if (!probs.empty()) common_dtype(op, {*mats.begin(), probs});
  return t;
}

}  // namespace

void check_attention_shapes(const std::string& op, const AttentionShape& s, Mat q, Mat k, Mat v,
                            Mat lse, Mat probs) {
  require(s.batch > 0 && s.seq > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0, op,
          "batch, seq, heads, kv_heads and head_dim must all be positive");
  require(s.heads % s.kv_heads == 0, op,
          "heads " + std::to_string(s.heads) + " is not a multiple of kv_heads " +
              std::to_string(s.kv_heads));
  const std::int64_t tokens = static_cast<std::int64_t>(s.batch) * s.seq;
  require_shape(q, tokens, static_cast<std::int64_t>(s.heads) * s.head_dim, op, "q");
  require_shape(k, tokens, static_cast<std::int64_t>(s.kv_heads) * s.head_dim, op, "k");
  require_shape(v, tokens, static_cast<std::int64_t>(s.kv_heads) * s.head_dim, op, "v");
  require_shape(lse, static_cast<std::int64_t>(s.batch) * s.heads, s.seq, op, "lse");
  if (!probs.empty()) {
    require_shape(probs, static_cast<std::int64_t>(s.batch) * s.heads * s.seq, s.seq, op, "probs");
  }
}

void attention_forward(Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v, const AttentionShape& s) {
  const std::string op = "attention_forward";
  check_attention_shapes(op, s, q, k, v, lse, probs);
  require_shape(out, q.rows, q.cols, op, "out");
  const Geometry g(s);
  dispatch(attention_dtype(op, probs, {out, lse, q, k, v}), op,
           [&](auto t) { forward_impl<decltype(t)>(out, lse, probs, q, k, v, g); });
}

void attention_backward(Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat lse, Mat probs,
                        const AttentionShape& s) {
  const std::string op = "attention_backward";
  check_attention_shapes(op, s, q, k, v, lse, probs);
  require_shape(dq, q.rows, q.cols, op, "dq");
  require_shape(dout, q.rows, q.cols, op, "dout");
  require_shape(dk, k.rows, k.cols, op, "dk");
  require_shape(dv, v.rows, v.cols, op, "dv");
  const Geometry g(s);
  dispatch(attention_dtype(op, probs, {dq, dk, dv, dout, q, k, v, lse}), op,
           [&](auto t) { backward_impl<decltype(t)>(dq, dk, dv, dout, q, k, v, lse, probs, g); });
}

}  // namespace tinyllama::cpu
