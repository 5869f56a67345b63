#include "infer/rounded_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/narrow_float.h"
#include "model/param_layout.h"

namespace tinyllama::reference {
namespace {

double to_bf16(double v) {
  return bf16_bits_to_double(round_to_bf16_bits(v));
}

// Where each mode rounds. Device (ops/decode in bfloat16): the matmul
// weights (the embedding as the LM head's); the RMSNorm outputs; q, k and v
// out of the QKV product, q and k again after RoPE; the attention output
// (scores, softmax and sums fp32); gate and up; silu(gate) * up. The
// residual stream (from fp32 embedding rows), the norm weights and the
// logits are fp32, as under autocast: with the stream in bf16 from bf16
// embedding rows and the norm weights in bf16 the device's points were up
// to 3.9x as far from fp64 as autocast's on runs of 10 positions
// (rounded_reference_test.cc). So the device rounds at a subset of
// autocast's points, but for the residual adds (x + the product, with the
// product unrounded: the GEMV's epilogue, cuBLASLt's beta = 1, into fp32).
// Autocast (test_parity.py's model under torch.autocast(bfloat16), fp32
// parameters): matmuls take bf16 operands (the weights cast, activations
// rounded) and give bf16 outputs, the scores included, whose division by
// sqrt(hd) is a bf16 op; softmax runs in fp32, its output rounded for the
// product with v; silu of a bf16 gate is bf16, its product with up too; the
// embedding rows, the residual stream, RMSNorm and RoPE stay fp32.
struct Points {
  explicit Points(Rounding r) : device(r == Rounding::Device), autocast(r == Rounding::Autocast) {}
  double stored(double v) const { return device ? to_bf16(v) : v; }     // a bf16 device buffer
  double operand(double v) const { return autocast ? to_bf16(v) : v; }  // an autocast matmul's
  double product(double v) const {  // a matmul's output into a buffer of its own
    return device || autocast ? to_bf16(v) : v;
  }
  bool device, autocast;
};

class Forward {
 public:
  Forward(const ModelConfig& cfg, const std::vector<double>& params, const ForwardOptions& o)
      : cfg_(cfg), layout_(cfg), o_(o), at_(o.rounding), lookup_(params), matrix_(params) {
    // Norm weights and embedding rows (lookup_), matmul weights (matrix_).
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (at_.device || at_.autocast) {
        lookup_[i] = static_cast<float>(params[i]);
        matrix_[i] = to_bf16(lookup_[i]);  // the upload's rounding: fp64 -> fp32 -> bf16
      }
    }
  }

  std::vector<double> run(const std::vector<std::int32_t>& tokens) {
    const auto n = static_cast<std::int64_t>(tokens.size());
    const int d = cfg_.hidden_dim;
    std::vector<double> x(static_cast<std::size_t>(n * d));
    const ParamSlot& emb = layout_.embedding();
    for (std::int64_t t = 0; t < n; ++t) {
      const double* row = &lookup_[emb.offset + tokens[t] * std::int64_t{d}];
      std::copy(row, row + d, x.begin() + t * d);
    }
    for (int l = 0; l < cfg_.num_layers; ++l) layer(l, x, n);
    const std::vector<double> norm = rmsnorm(x, n, layout_.final_norm());
    std::vector<double> logits = linear(norm, n, emb.offset, cfg_.vocab_size, d);
    for (double& v : logits) {
      if (at_.autocast) v = to_bf16(v);  // the device's logits are fp32: exact enough here
    }
    return logits;
  }

 private:
  // v rounded to float32 under fp32_arithmetic: after each step the device
  // computes in float32.
  double fp(double v) const { return o_.fp32_arithmetic ? static_cast<float>(v) : v; }

  // Under fp32_arithmetic each step rounds once, as an FMA does (toward zero
  // for Summation::TowardZero, to nearest otherwise).
  double dot(const double* a, const double* b, std::int64_t k) const {
    double acc = 0;
    if (!o_.fp32_arithmetic || o_.order == Summation::Sequential) {
      for (std::int64_t i = 0; i < k; ++i) acc = fp(acc + a[i] * b[i]);
      return acc;
    }
    if (o_.order == Summation::TowardZero) {
      for (std::int64_t i = 0; i < k; ++i) {
        const double sum = acc + a[i] * b[i];
        float f = static_cast<float>(sum);
        if (std::abs(static_cast<double>(f)) > std::abs(sum)) f = std::nextafter(f, 0.0f);
        acc = f;
      }
      return acc;
    }
    if (o_.order == Summation::Reversed) {
      for (std::int64_t i = k - 1; i >= 0; --i) acc = fp(acc + a[i] * b[i]);
      return acc;
    }
    const int run = o_.order == Summation::Lanes8 ? 8 : 4;
    double lane[32] = {};
    for (std::int64_t c = 0; c < k; c += 32 * run) {
      for (int l = 0; l < 32; ++l) {
        for (std::int64_t i = c + l * run; i < std::min(k, c + (l + 1) * run); ++i) {
          lane[l] = fp(lane[l] + a[i] * b[i]);
        }
      }
    }
    for (int half = 16; half >= 1; half /= 2) {
      for (int l = 0; l < half; ++l) lane[l] = fp(lane[l] + lane[l + half]);
    }
    return lane[0];
  }

  // y[t][j] = x[t] . W[j] for the matmul weight at `offset` ([rows, k]);
  // x's rows rounded first when autocast casts them.
  std::vector<double> linear(const std::vector<double>& x, std::int64_t n, std::int64_t offset,
                             std::int64_t rows, std::int64_t k) const {
    std::vector<double> in(x.size()), y(static_cast<std::size_t>(n * rows));
    std::transform(x.begin(), x.end(), in.begin(), [&](double v) { return at_.operand(v); });
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t j = 0; j < rows; ++j) {
        y[t * rows + j] = dot(&in[t * k], &matrix_[offset + j * k], k);
      }
    }
    return y;
  }

  std::vector<double> rmsnorm(const std::vector<double>& x, std::int64_t n,
                              const ParamSlot& w) const {
    const int d = cfg_.hidden_dim;
    std::vector<double> y(x.size());
    for (std::int64_t t = 0; t < n; ++t) {
      const double ss = dot(&x[t * d], &x[t * d], d);
      const double rstd = fp(1.0 / std::sqrt(fp(fp(ss / d) + cfg_.rms_eps)));
      for (int i = 0; i < d; ++i) {
        y[t * d + i] = at_.stored(fp(fp(x[t * d + i] * rstd) * lookup_[w.offset + i]));
      }
    }
    return y;
  }

  // Interleaved pairs of columns [c0, c0 + width) of each row of qkv.
  void rope(std::vector<double>& qkv, std::int64_t n, int c0, int width) const {
    const int hd = cfg_.head_dim(), w = cfg_.qkv_dim();
    for (std::int64_t t = 0; t < n; ++t) {
      for (int c = c0; c < c0 + width; c += 2) {
        const int i = (c % hd) / 2;
        const bool query = c < cfg_.q_dim();
        const std::int64_t shift = query && o_.fault == Fault::QueryPositionOffByOne ? 1 : 0;
        const double angle =
            static_cast<double>(t + shift) * std::pow(cfg_.rope_theta, -2.0 * i / hd);
        const double a = qkv[t * w + c], b = qkv[t * w + c + 1];
        const double cs = fp(std::cos(angle)), sn = fp(std::sin(angle));
        qkv[t * w + c] = at_.stored(fp(fp(a * cs) - fp(b * sn)));
        qkv[t * w + c + 1] = at_.stored(fp(fp(a * sn) + fp(b * cs)));
      }
    }
  }

  // Causal GQA attention out of qkv's q, k and v columns: [n, H * hd].
  std::vector<double> attention(const std::vector<double>& qkv, std::int64_t n) const {
    const int hd = cfg_.head_dim(), w = cfg_.qkv_dim(), qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
    const int group = cfg_.num_heads / cfg_.num_kv_heads;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    std::vector<double> out(static_cast<std::size_t>(n * qd)), s(static_cast<std::size_t>(n));
    std::vector<double> q(static_cast<std::size_t>(hd)), k(static_cast<std::size_t>(hd));
    for (std::int64_t t = 0; t < n; ++t) {
      for (int h = 0; h < cfg_.num_heads; ++h) {
        const int kc = qd + (h / group) * hd, vc = kc + kvd;
        for (int i = 0; i < hd; ++i) q[i] = at_.operand(qkv[t * w + h * hd + i]);
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j <= t; ++j) {
          for (int i = 0; i < hd; ++i) k[i] = at_.operand(qkv[j * w + kc + i]);
          const double score = dot(q.data(), k.data(), hd);
          s[j] = at_.autocast ? to_bf16(to_bf16(score) / std::sqrt(static_cast<double>(hd)))
                              : fp(score * scale);
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (std::int64_t j = 0; j <= t; ++j) sum = fp(sum + fp(std::exp(fp(s[j] - m))));
        for (int i = 0; i < hd; ++i) {
          double o = 0;
          for (std::int64_t j = 0; j <= t; ++j) {
            const double p =
                at_.autocast ? at_.operand(std::exp(s[j] - m) / sum) : fp(std::exp(fp(s[j] - m)));
            o = fp(o + p * qkv[j * w + vc + i]);
          }
          out[t * qd + h * hd + i] = at_.product(at_.autocast ? o : fp(o / sum));
        }
      }
    }
    return out;
  }

  // x (+)= p: the residual stream is fp32 in every mode; autocast rounds
  // the product, the device adds it unrounded.
  void residual(std::vector<double>& x, const std::vector<double>& p, bool add) const {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double product = at_.autocast ? to_bf16(p[i]) : p[i];
      x[i] = fp((add ? x[i] : 0.0) + product);
    }
  }

  void layer(int l, std::vector<double>& x, std::int64_t n) const {
    const int d = cfg_.hidden_dim, f = cfg_.ffn_dim, qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
    const ParamSlot& wqkv = layout_.layer(l, &LayerSlots::wqkv);
    const ParamSlot& wgu = layout_.layer(l, &LayerSlots::wgu);
    std::vector<double> qkv = linear(rmsnorm(x, n, layout_.layer(l, &LayerSlots::attn_norm)), n,
                                     wqkv.offset, wqkv.rows, d);
    for (double& v : qkv) v = at_.product(v);
    rope(qkv, n, 0, qd + kvd);
    const std::vector<double> attn = attention(qkv, n);
    residual(x, linear(attn, n, layout_.layer(l, &LayerSlots::wo).offset, d, qd),
             o_.fault != Fault::NoAttentionResidual);

    const std::vector<double> gu =
        linear(rmsnorm(x, n, layout_.layer(l, &LayerSlots::ffn_norm)), n, wgu.offset, wgu.rows, d);
    std::vector<double> act(static_cast<std::size_t>(n * f));
    for (std::int64_t t = 0; t < n; ++t) {
      for (int j = 0; j < f; ++j) {
        const double g = at_.product(gu[t * 2 * f + j]), u = at_.product(gu[t * 2 * f + f + j]);
        const double silu = fp(g * fp(1.0 / fp(1.0 + fp(std::exp(-g)))));
        act[t * f + j] = at_.product(fp((at_.autocast ? to_bf16(silu) : silu) * u));
      }
    }
    residual(x, linear(act, n, layout_.layer(l, &LayerSlots::wdown).offset, d, f), true);
  }

  const ModelConfig& cfg_;
  ParamLayout layout_;
  ForwardOptions o_;
  Points at_;
  std::vector<double> lookup_, matrix_;
};

}  // namespace

std::vector<double> forward_logits(const ModelConfig& cfg, const std::vector<double>& params,
                                   const std::vector<std::int32_t>& tokens,
                                   const ForwardOptions& options) {
  return Forward(cfg, params, options).run(tokens);
}

double fp32_drift(const ModelConfig& cfg, const std::vector<double>& params,
                  const std::vector<std::int32_t>& tokens,
                  const std::vector<double>& device_logits) {
  double drift = 0;
  for (Summation order : kSummations) {
    const std::vector<double> got =
        forward_logits(cfg, params, tokens, {Rounding::Device, true, Fault::None, order});
    if (got.size() != device_logits.size()) return std::numeric_limits<double>::infinity();
    drift = std::max(drift, max_rel_error(got.data(), device_logits.data(),
                                          static_cast<std::int64_t>(got.size())));
  }
  return drift;
}

}  // namespace tinyllama::reference
