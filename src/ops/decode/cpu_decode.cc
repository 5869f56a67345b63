// The two ops that incremental decoding needs beyond the training step's:
// RoPE at explicit positions (a chunk of new tokens starts where the cache
// ends, not at position 0), and causal attention of those tokens' queries
// over the whole KV cache. Same math as cpu_rope.cc and cpu_attention.cc
// (interleaved pairs; softmax in double; query head h reads kv head
// h / (H/K)), so a prefill of a whole row equals the training forward pass.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_common.h"
#include "ops/decode/cpu_decode.h"

namespace tinyllama::cpu {
namespace {

template <typename T>
void rope_at_impl(Mat x, std::int64_t first_position, int head_dim, double theta) {
  const int pairs = head_dim / 2;
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const auto p = static_cast<double>(first_position + r);
    T* xr = row<T>(x, r);
    for (int i = 0; i < pairs; ++i) {
      const double angle = p * std::pow(theta, -2.0 * i / static_cast<double>(head_dim));
      const double c = std::cos(angle), s = std::sin(angle);
      for (std::int64_t h0 = 0; h0 < x.cols; h0 += head_dim) {
        const double a = xr[h0 + 2 * i];
        const double b = xr[h0 + 2 * i + 1];
        xr[h0 + 2 * i] = static_cast<T>(a * c - b * s);
        xr[h0 + 2 * i + 1] = static_cast<T>(a * s + b * c);
      }
    }
  }
}

template <typename T>
void cached_attention_impl(Mat out, Mat q, Mat k_cache, Mat v_cache, std::int64_t first_position,
                           int heads, int kv_heads, int head_dim) {
  const int group = heads / kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const std::int64_t tasks = q.rows * heads;
  const double work = 4.0 * static_cast<double>(k_cache.rows * head_dim);
  parallel_for(tasks, work, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<double> p(static_cast<std::size_t>(k_cache.rows));
    std::vector<double> o(static_cast<std::size_t>(head_dim));
    for (std::int64_t task = t0; task < t1; ++task) {
      const std::int64_t t = task / heads;
      const std::int64_t h = task % heads;
      const std::int64_t kvh = h / group;
      const std::int64_t last = first_position + t;  // attends to positions 0..last
      const T* qi = row<T>(q, t) + h * head_dim;
      double max_s = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j <= last; ++j) {
        const T* kj = row<T>(k_cache, j) + kvh * head_dim;
        double s = 0;
        for (int d = 0; d < head_dim; ++d) s += static_cast<double>(qi[d]) * kj[d];
        p[j] = scale * s;
        max_s = std::max(max_s, p[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j <= last; ++j) sum += std::exp(p[j] - max_s);
      const double lse = max_s + std::log(sum);
      std::fill(o.begin(), o.end(), 0.0);
      for (std::int64_t j = 0; j <= last; ++j) {
        const double pj = std::exp(p[j] - lse);
        const T* vj = row<T>(v_cache, j) + kvh * head_dim;
        for (int d = 0; d < head_dim; ++d) o[d] += pj * vj[d];
      }
      T* oi = row<T>(out, t) + h * head_dim;
      for (int d = 0; d < head_dim; ++d) oi[d] = static_cast<T>(o[d]);
    }
  });
}

}  // namespace

void rope_at(Mat x, std::int64_t first_position, int head_dim, double theta) {
  const std::string op = "rope_at";
  require(head_dim > 0 && head_dim % 2 == 0, op,
          "head_dim " + std::to_string(head_dim) + " must be positive and even");
  require(first_position >= 0, op, "first_position must not be negative");
  require_shape(x, x.rows, x.cols, op, "x");
  require(x.cols % head_dim == 0, op,
          "width " + std::to_string(x.cols) + " is not a multiple of head_dim " +
              std::to_string(head_dim));
  dispatch(x.dtype, op,
           [&](auto t) { rope_at_impl<decltype(t)>(x, first_position, head_dim, theta); });
}

void cached_attention(Mat out, Mat q, Mat k_cache, Mat v_cache, std::int64_t first_position,
                      int heads, int kv_heads, int head_dim) {
  const std::string op = "cached_attention";
  require(heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && head_dim > 0, op,
          "heads must be a positive multiple of kv_heads");
  require_shape(q, q.rows, std::int64_t{heads} * head_dim, op, "q");
  require_shape(out, q.rows, q.cols, op, "out");
  require_shape(k_cache, first_position + q.rows, std::int64_t{kv_heads} * head_dim, op, "k_cache");
  require_shape(v_cache, k_cache.rows, k_cache.cols, op, "v_cache");
  dispatch(common_dtype(op, {out, q, k_cache, v_cache}), op, [&](auto t) {
    cached_attention_impl<decltype(t)>(out, q, k_cache, v_cache, first_position, heads, kv_heads,
                                       head_dim);
  });
}

}  // namespace tinyllama::cpu
