#include "infer/decoder.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/errors.h"
#include "ops/decode/cpu_decode.h"

namespace tinyllama {

// Host memory from the backend, released with it.
struct Decoder::Buffer {
  Buffer(CpuBackend& b, std::size_t bytes) : backend(b), data(b.allocate(bytes)) {}
  ~Buffer() { backend.release(data); }
  CpuBackend& backend;
  void* data;
};

Decoder::Decoder(const ModelConfig& cfg, const std::vector<double>& params, int max_positions,
                 DType dtype)
    : cfg_(cfg), layout_(cfg), max_positions_(max_positions), dtype_(dtype) {
  cfg.validate();
  if (dtype != DType::F32 && dtype != DType::F64) {
    throw UsageError("the CPU decoder computes in float32 or float64");
  }
  if (max_positions < 1) throw UsageError("the decoder needs room for at least one position");
  if (static_cast<std::int64_t>(params.size()) != layout_.total()) {
    throw RuntimeFailure("Decoder: " + std::to_string(params.size()) + " parameters, the layout " +
                         std::to_string(layout_.total()));
  }
  const std::size_t elem = dtype_size(dtype);
  auto buffer = [&](std::int64_t elems) {
    return std::make_unique<Buffer>(backend_, static_cast<std::size_t>(elems) * elem);
  };
  weights_ = buffer(layout_.total());
  backend_.convert(Mat(weights_->data, dtype, 1, layout_.total()),
                   Mat(const_cast<double*>(params.data()), DType::F64, 1, layout_.total()));
  const std::int64_t rows = max_positions;
  for (int l = 0; l < cfg.num_layers; ++l) {
    k_cache_.push_back(buffer(rows * cfg.kv_dim()));
    v_cache_.push_back(buffer(rows * cfg.kv_dim()));
  }
  x_ = buffer(rows * cfg.hidden_dim);
  norm_ = buffer(rows * cfg.hidden_dim);
  rstd_ = buffer(rows);
  qkv_ = buffer(rows * cfg.qkv_dim());
  attn_ = buffer(rows * cfg.q_dim());
  proj_ = buffer(rows * cfg.hidden_dim);
  gate_up_ = buffer(rows * 2 * std::int64_t{cfg.ffn_dim});
  act_ = buffer(rows * cfg.ffn_dim);
  logits_ = buffer(rows * std::int64_t{cfg.vocab_size});
}

Decoder::~Decoder() = default;

// "cpu" alone for float32, as generate printed before there was a choice.
std::string Decoder::describe() const {
  return dtype_ == DType::F32 ? "cpu" : "cpu " + std::string(dtype_name(dtype_));
}

Mat Decoder::view(Buffer& b, std::int64_t rows, std::int64_t cols) const {
  return Mat(b.data, dtype_, rows, cols);
}

Mat Decoder::weight(const ParamSlot& s) const {
  auto* base =
      static_cast<char*>(weights_->data) + s.offset * static_cast<std::int64_t>(dtype_size(dtype_));
  return Mat(base, dtype_, s.rows, s.cols);
}

std::vector<double> Decoder::step(const std::vector<std::int32_t>& tokens, bool all_logits) {
  check_decode_step(cfg_, position_, max_positions_, tokens);
  const auto n = static_cast<std::int64_t>(tokens.size());
  const ModelConfig& c = cfg_;
  const std::int64_t p0 = position_;
  const int qd = c.q_dim(), kvd = c.kv_dim(), f = c.ffn_dim, hd = c.head_dim();
  const Mat x = view(*x_, n, c.hidden_dim), norm = view(*norm_, n, c.hidden_dim);
  const Mat rstd = view(*rstd_, n, 1), qkv = view(*qkv_, n, c.qkv_dim());
  const Mat attn = view(*attn_, n, qd), proj = view(*proj_, n, c.hidden_dim);
  const Mat gate_up = view(*gate_up_, n, 2 * std::int64_t{f}), act = view(*act_, n, f);
  const Mat embedding = weight(layout_.embedding());  // vocab_size rows: the padding is never read

  backend_.embedding_forward(x, tokens.data(), embedding);
  for (int l = 0; l < c.num_layers; ++l) {
    backend_.rmsnorm_forward(norm, rstd, x, weight(layout_.layer(l, &LayerSlots::attn_norm)),
                             c.rms_eps);
    backend_.gemm(qkv, norm, false, weight(layout_.layer(l, &LayerSlots::wqkv)), true, 1.0f, 0.0f);
    cpu::rope_at(qkv.col_block(0, qd + kvd), p0, hd, c.rope_theta);
    const Mat k_all = view(*k_cache_[l], max_positions_, kvd);
    const Mat v_all = view(*v_cache_[l], max_positions_, kvd);
    backend_.convert(k_all.row_block(p0, n), qkv.col_block(qd, kvd));
    backend_.convert(v_all.row_block(p0, n), qkv.col_block(qd + kvd, kvd));
    cpu::cached_attention(attn, qkv.col_block(0, qd), k_all.row_block(0, p0 + n),
                          v_all.row_block(0, p0 + n), p0, c.num_heads, c.num_kv_heads, hd);
    backend_.gemm(proj, attn, false, weight(layout_.layer(l, &LayerSlots::wo)), true, 1.0f, 0.0f);
    backend_.add(x, x, proj);
    backend_.rmsnorm_forward(norm, rstd, x, weight(layout_.layer(l, &LayerSlots::ffn_norm)),
                             c.rms_eps);
    backend_.gemm(gate_up, norm, false, weight(layout_.layer(l, &LayerSlots::wgu)), true, 1.0f,
                  0.0f);
    backend_.swiglu_forward(act, gate_up.col_block(0, f), gate_up.col_block(f, f));
    backend_.gemm(proj, act, false, weight(layout_.layer(l, &LayerSlots::wdown)), true, 1.0f, 0.0f);
    backend_.add(x, x, proj);
  }
  backend_.rmsnorm_forward(norm, rstd, x, weight(layout_.final_norm()), c.rms_eps);
  const std::int64_t first = all_logits ? 0 : n - 1;
  const Mat logits = view(*logits_, n - first, c.vocab_size);
  backend_.gemm(logits, norm.row_block(first, n - first), false, embedding, true, 1.0f, 0.0f);
  position_ += static_cast<int>(n);

  std::vector<double> out(static_cast<std::size_t>(logits.numel()));
  backend_.convert(Mat(out.data(), DType::F64, logits.rows, logits.cols), logits);
  return out;
}

}  // namespace tinyllama
