#include "cuda/cuda_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"
#include "device/cuda_check.h"
#include "ops/convert/cuda_convert.h"
#include "ops/decode/cuda_decode.h"
#include "ops/embedding/cuda_embedding.h"
#include "ops/norm/cuda_rmsnorm.h"
#include "ops/swiglu/cuda_swiglu.h"

namespace tinyllama::cuda {
namespace {

// Cache rows a batch-1 attention block covers at least: short enough that
// the heads times the chunks fill the GPU at the lengths generation sees,
// and that each of a block's 4 warps walks a chain of only a few dependent
// rows (the latency of each is a load from HBM or L2).
constexpr int kAttentionChunk = 16;
constexpr int kMaxSplits = 128;
constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;
constexpr std::int64_t kUploadElements = std::int64_t{1} << 24;  // weights moved per copy

}  // namespace

// Every device and pinned allocation of the decoder, made in the
// constructor and freed together.
struct CudaDecoder::Device {
  ~Device() {
    for (void* p : device) cudaFree(p);
    for (void* p : pinned) cudaFreeHost(p);
    if (staged != nullptr) cudaEventDestroy(staged);
  }
  void* take(std::size_t bytes, const char* what) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, std::max<std::size_t>(bytes, 1));
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw RuntimeFailure("generate: cannot allocate " + std::to_string(bytes >> 20) +
                           " MiB on the GPU for " + what + " (" + cudaGetErrorString(err) + ")");
    }
    device.push_back(p);
    return p;
  }
  void* take_pinned(std::size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    pinned.push_back(p);
    return p;
  }

  std::vector<void*> device, pinned;
  void *weights = nullptr, *cache = nullptr, *norm = nullptr, *qkv = nullptr, *attn = nullptr,
       *gate_up = nullptr, *act = nullptr;
  // The residual stream, fp32 in every dtype (as under torch.autocast), and
  // in bfloat16 the RMSNorm's fp32 output before it is rounded.
  float *x = nullptr, *norm32 = nullptr;
  // In bfloat16, fp32 copies of the embedding rows (the stream's first
  // value) and the norm weights (CudaDecoder::lookup_at_).
  float* lookup = nullptr;
  float *rstd = nullptr, *logits = nullptr, *attention_scratch = nullptr;
  double* inv_freq = nullptr;
  // [0]: the first position of the chunk, [1 ..]: its tokens; what the
  // kernels (and a replayed graph) read. `staging` is its pinned source.
  std::int32_t* ids = nullptr;
  std::int32_t* staging = nullptr;
  float* host_logits = nullptr;  // pinned
  cudaEvent_t staged = nullptr;  // after the latest copy out of `staging`
};

CudaDecoder::CudaDecoder(const ModelConfig& cfg, const std::vector<double>& params,
                         int max_positions, const CudaDecodeOptions& options)
    : cfg_(cfg), layout_(cfg), max_positions_(max_positions), options_(options) {
  cfg.validate();
  if (options.dtype != DType::F32 && options.dtype != DType::BF16) {
    throw UsageError("the CUDA decoder computes in float32 or bfloat16, not " +
                     std::string(dtype_name(options.dtype)));
  }
  if (max_positions < 1) throw UsageError("the decoder needs room for at least one position");
  if (cfg.head_dim() > 256) {
    throw UsageError("the CUDA decoder supports head_dim up to 256, not " +
                     std::to_string(cfg.head_dim()));
  }
  if (static_cast<std::int64_t>(params.size()) != layout_.total()) {
    throw RuntimeFailure("CudaDecoder: " + std::to_string(params.size()) +
                         " parameters, the layout " + std::to_string(layout_.total()));
  }
  dev_ = std::make_unique<Device>();
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&dev_->staged, cudaEventDisableTiming));
  gemm_ = std::make_unique<GemmRunner>();
  gemm_->set_stream(stream_);
  // Prefill shapes change with every prompt: timing candidates at each new
  // one would cost more than the rank-0 algorithm loses.
  gemm_->set_autotune(false);
  gemm_->set_workspace(dev_->take(kGemmWorkspaceBytes, "the cuBLASLt workspace"),
                       kGemmWorkspaceBytes);
  graph_ = std::make_unique<GraphRecorder>(stream_);

  const std::size_t es = dtype_size(options.dtype);
  const std::int64_t rows = std::min(kChunkRows, max_positions);
  const std::int64_t d = cfg.hidden_dim, f = cfg.ffn_dim, kv = cfg.kv_dim();
  splits_ = static_cast<int>(std::clamp<std::int64_t>(
      (max_positions + kAttentionChunk - 1) / kAttentionChunk, 1, kMaxSplits));
  attention_scratch_floats_ = decode_attention_scratch_floats(std::max<std::int64_t>(rows, splits_),
                                                              cfg.num_heads, cfg.head_dim());

  dev_->weights = dev_->take(static_cast<std::size_t>(layout_.total()) * es, "the weights");
  dev_->cache = dev_->take(
      static_cast<std::size_t>(2 * std::int64_t{cfg.num_layers} * max_positions * kv) * es,
      "the KV cache");
  auto rows_of = [&](std::int64_t cols, const char* what) {
    return dev_->take(static_cast<std::size_t>(rows * cols) * es, what);
  };
  dev_->x = static_cast<float*>(dev_->take(static_cast<std::size_t>(rows * d) * 4, "activations"));
  dev_->norm = rows_of(d, "activations");
  if (options.dtype != DType::F32) {
    dev_->norm32 =
        static_cast<float*>(dev_->take(static_cast<std::size_t>(rows * d) * 4, "activations"));
  }
  dev_->qkv = rows_of(cfg.qkv_dim(), "activations");
  dev_->attn = rows_of(cfg.q_dim(), "activations");
  dev_->gate_up = rows_of(2 * f, "activations");
  dev_->act = rows_of(f, "activations");
  dev_->rstd = static_cast<float*>(dev_->take(static_cast<std::size_t>(rows) * 4, "activations"));
  const std::size_t logits_bytes = static_cast<std::size_t>(rows) * cfg.vocab_size * 4;
  dev_->logits = static_cast<float*>(dev_->take(logits_bytes, "the logits"));
  dev_->host_logits = static_cast<float*>(dev_->take_pinned(logits_bytes));
  dev_->attention_scratch = static_cast<float*>(
      dev_->take(static_cast<std::size_t>(attention_scratch_floats_) * 4, "the attention scratch"));
  dev_->ids = static_cast<std::int32_t*>(
      dev_->take(static_cast<std::size_t>(rows + 1) * 4, "the token ids"));
  dev_->staging =
      static_cast<std::int32_t*>(dev_->take_pinned(static_cast<std::size_t>(rows + 1) * 4));

  // The frequencies in double, as the CPU reference forms them.
  const int half = cfg.head_dim() / 2;
  std::vector<double> inv(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) inv[i] = std::pow(cfg.rope_theta, -2.0 * i / cfg.head_dim());
  dev_->inv_freq = static_cast<double*>(dev_->take(inv.size() * sizeof(double), "RoPE"));
  CUDA_CHECK(
      cudaMemcpy(dev_->inv_freq, inv.data(), inv.size() * sizeof(double), cudaMemcpyHostToDevice));
  upload_weights(params);
  upload_lookup(params);
  fused_ = options_.own_gemv && options_.fused &&
           gemv_fused_fits(std::max({d, f, std::int64_t{cfg.q_dim()}}), options.dtype);
  programmatic_ = fused_ && options_.programmatic;
  if (options_.graph) capture_single();
}

CudaDecoder::~CudaDecoder() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  graph_.reset();
  gemm_.reset();
  dev_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// fp64 on the host -> fp32 -> the compute dtype on the device (rounded by
// the device, as the training step's compute copy is), a slice at a time so
// that a large model needs no second full-size copy.
void CudaDecoder::upload_weights(const std::vector<double>& params) {
  const std::int64_t total = layout_.total();
  const std::int64_t slice = std::min(total, kUploadElements);
  std::vector<float> host(static_cast<std::size_t>(slice));
  float* staging = options_.dtype == DType::F32
                       ? nullptr
                       : static_cast<float*>(
                             dev_->take(static_cast<std::size_t>(slice) * 4, "the weight upload"));
  const std::size_t es = dtype_size(options_.dtype);
  for (std::int64_t i = 0; i < total; i += slice) {
    const std::int64_t m = std::min(slice, total - i);
    std::transform(params.begin() + i, params.begin() + i + m, host.begin(),
                   [](double v) { return static_cast<float>(v); });
    void* dst = static_cast<char*>(dev_->weights) + i * static_cast<std::int64_t>(es);
    if (staging == nullptr) {
      CUDA_CHECK(
          cudaMemcpy(dst, host.data(), static_cast<std::size_t>(m) * 4, cudaMemcpyHostToDevice));
    } else {
      CUDA_CHECK(cudaMemcpy(staging, host.data(), static_cast<std::size_t>(m) * 4,
                            cudaMemcpyHostToDevice));
      convert(Mat(dst, options_.dtype, 1, m), Mat(staging, DType::F32, 1, m), stream_);
      CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
  }
}

// In bfloat16, an fp32 copy of what autocast keeps in fp32 although the
// training step's compute copy rounds it: the norm weights, read whole by
// every norm, and the embedding rows, the fp32 residual stream's first
// value. Rounded to bf16 (with the stream in bf16) they put the decoder's
// logits at up to 3.9x autocast's error against fp64 on short runs of the
// tests' models, 7 of 160 runs past DESIGN §2's bar; with neither, at most
// 1.5x (rounded_reference_test.cc). The embedding costs vocab * D * 4 bytes
// more memory; a token reads one row of it.
void CudaDecoder::upload_lookup(const std::vector<double>& params) {
  if (options_.dtype == DType::F32) return;
  std::vector<const ParamSlot*> slots = {&layout_.embedding()};
  for (const ParamSlot& s : layout_.slots()) {
    if (s.is_norm) slots.push_back(&s);
  }
  std::int64_t count = 0;
  for (const ParamSlot* s : slots) {
    lookup_at_[s->offset] = count;
    count += s->numel();
  }
  dev_->lookup = static_cast<float*>(
      dev_->take(static_cast<std::size_t>(count) * 4, "the fp32 embedding rows and norm weights"));
  std::vector<float> host;
  for (const ParamSlot* s : slots) {
    host.resize(static_cast<std::size_t>(s->numel()));
    std::transform(params.begin() + s->offset, params.begin() + s->offset + s->numel(),
                   host.begin(), [](double v) { return static_cast<float>(v); });
    CUDA_CHECK(cudaMemcpy(dev_->lookup + lookup_at_.at(s->offset), host.data(), host.size() * 4,
                          cudaMemcpyHostToDevice));
  }
}

Mat CudaDecoder::lookup(const ParamSlot& s) const {
  if (options_.dtype == DType::F32) return weight(s);
  return Mat(dev_->lookup + lookup_at_.at(s.offset), DType::F32, s.rows, s.cols);
}

void CudaDecoder::rmsnorm(Mat out, Mat rstd, Mat x, const ParamSlot& w) {
  if (out.dtype == DType::F32) {
    rmsnorm_forward(out, rstd, x, lookup(w), cfg_.rms_eps, stream_);
    return;
  }
  const Mat wide(dev_->norm32, DType::F32, out.rows, out.cols);
  rmsnorm_forward(wide, rstd, x, lookup(w), cfg_.rms_eps, stream_);
  convert(out, wide, stream_);
}

Mat CudaDecoder::buffer(void* base, std::int64_t rows, std::int64_t cols, DType t) const {
  return Mat(base, t, rows, cols);
}

Mat CudaDecoder::weight(const ParamSlot& s) const {
  auto* base = static_cast<char*>(dev_->weights) +
               s.offset * static_cast<std::int64_t>(dtype_size(options_.dtype));
  return Mat(base, options_.dtype, s.rows, s.cols);
}

void CudaDecoder::linear(Mat out, Mat in, Mat w, bool accumulate) {
  if (in.rows == 1 && options_.own_gemv) {
    gemv(out, in, w, accumulate ? out : Mat(), stream_);
  } else {
    gemm_->run(out, in, false, w, true, 1.0f, accumulate ? 1.0f : 0.0f);
  }
}

void CudaDecoder::enqueue_fused_single() {
  const ModelConfig& c = cfg_;
  const DType t = options_.dtype;
  const std::int32_t* position = dev_->ids;
  const Mat x = buffer(dev_->x, 1, c.hidden_dim, DType::F32);
  const Mat q = buffer(dev_->qkv, 1, c.q_dim(), t), attn = buffer(dev_->attn, 1, c.q_dim(), t);
  const Mat act = buffer(dev_->act, 1, c.ffn_dim, t);
  const Mat embedding = weight(layout_.embedding()).row_block(0, c.vocab_size);
  const std::int64_t cache_elems = std::int64_t{max_positions_} * c.kv_dim();
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(t));

  embedding_forward(x, dev_->ids + 1, lookup(layout_.embedding()).row_block(0, c.vocab_size),
                    stream_);
  for (int l = 0; l < c.num_layers; ++l) {
    char* layer_cache = static_cast<char*>(dev_->cache) + 2 * l * cache_elems * es;
    const Mat k_cache(layer_cache, t, max_positions_, c.kv_dim());
    const Mat v_cache(layer_cache + cache_elems * es, t, max_positions_, c.kv_dim());
    gemv_norm_qkv_rope(q, k_cache, v_cache, x, weight(layout_.layer(l, &LayerSlots::wqkv)),
                       lookup(layout_.layer(l, &LayerSlots::attn_norm)), c.rms_eps, position,
                       dev_->inv_freq, c.num_heads, c.num_kv_heads, c.head_dim(), stream_,
                       programmatic_);
    decode_attention(attn, q, k_cache, v_cache, position, c.num_heads, c.num_kv_heads, c.head_dim(),
                     splits_, dev_->attention_scratch, attention_scratch_floats_, stream_,
                     programmatic_);
    gemv_fused(x, attn, weight(layout_.layer(l, &LayerSlots::wo)), nullptr, 0.0, true, stream_,
               programmatic_);
    gemv_norm_swiglu(act, x, weight(layout_.layer(l, &LayerSlots::wgu)),
                     lookup(layout_.layer(l, &LayerSlots::ffn_norm)), c.rms_eps, stream_,
                     programmatic_);
    gemv_fused(x, act, weight(layout_.layer(l, &LayerSlots::wdown)), nullptr, 0.0, true, stream_,
               programmatic_);
  }
  const Mat final_norm = lookup(layout_.final_norm());
  gemv_fused(buffer(dev_->logits, 1, c.vocab_size, DType::F32), x, embedding, &final_norm,
             c.rms_eps, false, stream_, programmatic_);
}

void CudaDecoder::enqueue_chunk(int n, int first_logit) {
  if (n == 1 && first_logit == 0 && fused_) {
    enqueue_fused_single();
    return;
  }
  const ModelConfig& c = cfg_;
  const DType t = options_.dtype;
  const int qd = c.q_dim(), f = c.ffn_dim, hd = c.head_dim();
  const std::int32_t* first_position = dev_->ids;
  const std::int32_t* tokens = dev_->ids + 1;
  const Mat x = buffer(dev_->x, n, c.hidden_dim, DType::F32);
  const Mat norm = buffer(dev_->norm, n, c.hidden_dim, t);
  const Mat rstd = buffer(dev_->rstd, n, 1, DType::F32);
  const Mat qkv = buffer(dev_->qkv, n, c.qkv_dim(), t), attn = buffer(dev_->attn, n, qd, t);
  const Mat gate_up = buffer(dev_->gate_up, n, 2 * std::int64_t{f}, t);
  const Mat act = buffer(dev_->act, n, f, t);
  // The padding rows of the tied embedding are never read.
  const Mat embedding = weight(layout_.embedding()).row_block(0, c.vocab_size);
  // A batch-1 step splits the cache among blocks; a chunk of many queries
  // has a block per query already, and the scratch holds so many.
  const std::int64_t capacity =
      std::max<std::int64_t>(std::min(kChunkRows, max_positions_), splits_);
  const int splits =
      n == 1 ? splits_ : static_cast<int>(std::clamp<std::int64_t>(capacity / n, 1, splits_));
  const std::int64_t cache_elems = std::int64_t{max_positions_} * c.kv_dim();

  embedding_forward(x, tokens, lookup(layout_.embedding()).row_block(0, c.vocab_size), stream_);
  for (int l = 0; l < c.num_layers; ++l) {
    char* layer_cache = static_cast<char*>(dev_->cache) +
                        2 * l * cache_elems * static_cast<std::int64_t>(dtype_size(t));
    const Mat k_cache(layer_cache, t, max_positions_, c.kv_dim());
    const Mat v_cache(layer_cache + cache_elems * static_cast<std::int64_t>(dtype_size(t)), t,
                      max_positions_, c.kv_dim());
    rmsnorm(norm, rstd, x, layout_.layer(l, &LayerSlots::attn_norm));
    linear(qkv, norm, weight(layout_.layer(l, &LayerSlots::wqkv)), false);
    rope_append(qkv, k_cache, v_cache, first_position, dev_->inv_freq, c.num_heads, c.num_kv_heads,
                hd, stream_);
    decode_attention(attn, qkv.col_block(0, qd), k_cache, v_cache, first_position, c.num_heads,
                     c.num_kv_heads, hd, splits, dev_->attention_scratch, attention_scratch_floats_,
                     stream_);
    linear(x, attn, weight(layout_.layer(l, &LayerSlots::wo)), true);  // the residual add
    rmsnorm(norm, rstd, x, layout_.layer(l, &LayerSlots::ffn_norm));
    linear(gate_up, norm, weight(layout_.layer(l, &LayerSlots::wgu)), false);
    swiglu_forward(act, gate_up.col_block(0, f), gate_up.col_block(f, f), stream_);
    linear(x, act, weight(layout_.layer(l, &LayerSlots::wdown)), true);
  }
  if (first_logit >= n) return;
  const Mat last = norm.row_block(first_logit, n - first_logit);
  rmsnorm(last, rstd.row_block(0, last.rows), x.row_block(first_logit, last.rows),
          layout_.final_norm());
  linear(buffer(dev_->logits, last.rows, c.vocab_size, DType::F32), last, embedding, false);
}

std::string CudaDecoder::describe() const {
  return "cuda " + std::string(dtype_name(options_.dtype)) +
         (graph_ready_ ? ", graph" : ", eager") +
         (fused_              ? (programmatic_ ? ", fused gemv, pdl" : ", fused gemv")
          : options_.own_gemv ? ", own gemv"
                              : ", cublaslt gemv");
}

// Captured once, at construction: recording runs nothing, and the kernels
// read the token and its position from dev_->ids when the graph replays, so
// the first token's time is not the capture's.
void CudaDecoder::capture_single() {
  try {
    graph_->begin();
    enqueue_chunk(1, 0);
    graph_->end(true, 0);
    graph_ready_ = true;
  } catch (const RuntimeFailure&) {
    graph_->abort();  // the device's error state is cleared
    if (programmatic_) {
      // A driver that cannot capture programmatic launches: capture the
      // serial ones (describe() says which ran).
      programmatic_ = false;
      capture_single();
    }
    // else batch-1 steps run eagerly
  }
}

void CudaDecoder::run_single() {
  if (graph_ready_) {
    graph_->launch(0);
  } else {
    enqueue_chunk(1, 0);
  }
}

std::vector<double> CudaDecoder::step(const std::vector<std::int32_t>& tokens, bool all_logits) {
  check_decode_step(cfg_, position_, max_positions_, tokens);
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t rows = std::min(kChunkRows, max_positions_);
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>((all_logits ? n : 1) * cfg_.vocab_size));
  for (std::int64_t c0 = 0; c0 < n; c0 += rows) {
    const int m = static_cast<int>(std::min(rows, n - c0));
    // The previous chunk's copy out of the staging buffer must be done
    // before it is overwritten.
    CUDA_CHECK(cudaEventSynchronize(dev_->staged));
    dev_->staging[0] = position_;
    std::copy(tokens.begin() + c0, tokens.begin() + c0 + m, dev_->staging + 1);
    CUDA_CHECK(cudaMemcpyAsync(dev_->ids, dev_->staging, static_cast<std::size_t>(m + 1) * 4,
                               cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaEventRecord(dev_->staged, stream_));
    const bool last_chunk = c0 + m == n;
    const int first_logit = all_logits ? 0 : (last_chunk ? m - 1 : m);
    if (m == 1 && first_logit == 0) {
      run_single();
    } else {
      enqueue_chunk(m, first_logit);
    }
    position_ += m;
    const std::size_t count = static_cast<std::size_t>(m - first_logit) * cfg_.vocab_size;
    if (count == 0) continue;
    CUDA_CHECK(cudaMemcpyAsync(dev_->host_logits, dev_->logits, count * 4, cudaMemcpyDeviceToHost,
                               stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    out.insert(out.end(), dev_->host_logits, dev_->host_logits + count);
  }
  return out;
}

}  // namespace tinyllama::cuda
