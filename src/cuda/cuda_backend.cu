// CudaBackend: construction, prepare() and the workspaces it sizes, memory,
// the stream and timers, graph capture, GEMMs and the side branches (weight
// gradients, per-layer updates, collectives). The op routing is in
// cuda_backend_ops.cu.
#include "cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/errors.h"
#include "cuda/cuda_entry.h"
#include "cuda/cuda_workspaces.h"
#include "device/cuda_check.h"
#include "device/cuda_env.h"
#include "device/cuda_event_timer.h"
#include "device/cuda_launch.h"
#include "ops/attention/cuda_attention_choice.h"
#include "ops/convert/cuda_convert.h"
#include "ops/embedding/cuda_embedding.h"
#include "ops/norm/cuda_rmsnorm.h"
#include "ops/optimizer/cuda_adamw.h"
#include "ops/rope/cuda_rope.h"

namespace tinyllama::cuda {
namespace {

bool stream_priorities_enabled() {
  return env_flag(std::getenv("TINYLLAMA_STREAM_PRIORITIES"), true);
}

void* device_alloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it
    char mb[32];
    std::snprintf(mb, sizeof(mb), "%.1f", static_cast<double>(bytes) / 1e6);
    throw RuntimeFailure(std::string("CUDA: cannot allocate ") + mb + " MB for " + what + ": " +
                         cudaGetErrorString(err));
  }
  return p;
}

}  // namespace

CudaBackend::CudaBackend(Precision precision) : precision_(precision) {
  for (DType t : {precision.master, precision.compute}) {
    if (t == DType::F64) {
      throw RuntimeFailure(
          "--device cuda: float64 is not supported on CUDA (the CPU backend runs "
          "float64 gradient checks)");
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw RuntimeFailure("--device cuda: no CUDA device is available");
  }
  // The device the process selected (a data-parallel rank picks its own
  // before creating a backend), device 0 otherwise.
  CUDA_CHECK(cudaGetDevice(&device_));
  CUDA_CHECK(cudaSetDevice(device_));
  facts_ = cuda_device_caps();
  // Stream priorities: the main stream and the weight-gradient branch at the
  // device's highest, the per-layer AdamW sweeps at its lowest. A sweep is
  // memory-bound with thousands of blocks; at equal priority its blocks take
  // every SM a GEMM frees and the next GEMM of the backward pass waits
  // behind them (the profile showed the data-gradient GEMMs beside a sweep
  // at 36-50 % of what they reach alone). With priorities the block
  // scheduler places the GEMM's blocks first and the sweep fills the gaps.
  // Measured on the H100 (docs/log/2026-11-24.md, seventh session): bf16
  // B8 S128 1.52 against 1.59 ms, GPT-2 size 32.4 against 32.7 ms, the rest
  // level; but fp32 B8 S128 6.12 against 6.02 ms, where the sweeps are best
  // run as early as the long SIMT GEMMs let them. So fp32 compute keeps
  // equal priorities. TINYLLAMA_STREAM_PRIORITIES=off keeps them equal
  // everywhere, for comparison.
  int lowest = 0, highest = 0;
  if (precision.compute != DType::F32 && stream_priorities_enabled()) {
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
  }
  // Non-blocking: the legacy default stream never serialises against it.
  CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, highest));
  gemm_ = std::make_unique<GemmRunner>();
  gemm_->set_stream(stream_);
  uploader_ = std::make_unique<PinnedUploader>(stream_);
  graph_ = std::make_unique<GraphRecorder>(stream_);
  side_ = std::make_unique<SideBranch>(highest);
  side_gemm_ = std::make_unique<GemmRunner>();
  side_gemm_->set_stream(side_->stream());
  fp8_gemm_ = std::make_unique<cuda::Fp8GemmRunner>();
  fp8_gemm_->set_stream(stream_);
  side_fp8_gemm_ = std::make_unique<cuda::Fp8GemmRunner>();
  side_fp8_gemm_->set_stream(side_->stream());
  updates_ = std::make_unique<SideBranch>(lowest);
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (side_) side_->synchronize();
  if (updates_) updates_->synchronize();
  set_kernel_launch(false);  // a later stream may reuse a handle of ours
  free_workspaces();
  gemm_.reset();
  side_gemm_.reset();
  fp8_gemm_.reset();
  side_fp8_gemm_.reset();
  side_.reset();
  updates_.reset();
  graph_.reset();  // both use the stream: gone before it is
  uploader_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaBackend::free_workspaces() {
  for (void* p : {gemm_workspace_, side_gemm_workspace_, gemm_tune_scratch_,
                  static_cast<void*>(rms_partials_), attention_block_, embedding_scratch_.block,
                  static_cast<void*>(rope_table_.cos_sin)}) {
    if (p != nullptr) cudaFree(p);
  }
  gemm_workspace_ = nullptr;
  side_gemm_workspace_ = nullptr;
  gemm_tune_scratch_ = nullptr;
  rms_partials_ = nullptr;
  attention_block_ = nullptr;
  rms_partial_capacity_ = 0;
  rms_counters_ = nullptr;
  materialized_scratch_ = AttentionScratch{};
  flash_scratch_ = FlashScratch{};
  rope_table_ = RopeTable{};
  cudnn_ = nullptr;
  cudnn_backward_planned_ = false;
  embedding_scratch_ = EmbeddingGradScratch{};
  workspace_bytes_ = 0;
  if (gemm_) {
    gemm_->set_workspace(nullptr, 0);
    gemm_->set_autotune_scratch(nullptr, 0);
  }
  if (side_gemm_) side_gemm_->set_workspace(nullptr, 0);
  if (fp8_gemm_) fp8_gemm_->set_workspace(nullptr, 0);
  if (side_fp8_gemm_) side_fp8_gemm_->set_workspace(nullptr, 0);
}

std::string describe_device(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char gib[32];
  std::snprintf(gib, sizeof(gib), "%.1f",
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(prop.name) + " (" + gib + " GiB, sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ")";
}

std::string CudaBackend::device_description() const {
  return describe_device(device_);
}

DeviceCaps CudaBackend::caps() const {
  return facts_;
}

void CudaBackend::prepare(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) {
  CUDA_CHECK(cudaStreamSynchronize(stream_));  // nothing in flight may use the old buffers
  side_->synchronize();
  updates_->synchronize();
  free_workspaces();
  // The workspaces are sized in the plan's dtypes, the kernels run in ours.
  if (plan.precision.compute != precision_.compute || plan.precision.master != precision_.master) {
    throw RuntimeFailure("CudaBackend::prepare: a plan for " + precision_name(plan.precision) +
                         " on a " + precision_name(precision_) + " backend");
  }
  // The sizes the plan lists (resolve_plan asked the same function).
  const CudaWorkspaceSizes w = workspace_sizes(cfg, shape, plan, gemm_->autotune());
  auto take = [&](std::int64_t bytes, const char* what) {
    workspace_bytes_ += bytes;
    return device_alloc(static_cast<std::size_t>(bytes), what);
  };
  gemm_workspace_ = take(w.gemm, "the cuBLASLt workspace");
  gemm_->set_workspace(gemm_workspace_, static_cast<std::size_t>(w.gemm));
  // Every SM until the model issues an exchange (gemms_beside_exchange).
  exchange_sm_margin_ = plan.parallel.gemm_sm_margin;
  set_gemm_sm_margin(0);
  fp8_gemm_->set_workspace(gemm_workspace_, static_cast<std::size_t>(w.gemm));
  set_kernel_launch(plan.ops.kernel_launch == KernelLaunch::Pdl);
  side_enabled_ = plan.parallel_branches;
  if (side_enabled_) {
    side_gemm_workspace_ = take(w.side_gemm, "the side cuBLASLt workspace");
    side_gemm_->set_workspace(side_gemm_workspace_, static_cast<std::size_t>(w.side_gemm));
    side_gemm_->set_autotune(gemm_->autotune());
    side_fp8_gemm_->set_workspace(side_gemm_workspace_, static_cast<std::size_t>(w.side_gemm));
  }
  if (w.gemm_tune > 0) {
    gemm_tune_scratch_ = take(w.gemm_tune, "the GEMM autotune scratch");
    gemm_->set_autotune_scratch(gemm_tune_scratch_, static_cast<std::size_t>(w.gemm_tune));
  }
  assign_rms_partials(take(w.rms_partials, "RMSNorm partial sums"), w.rms_partials, cfg.hidden_dim);

  kernels_ = plan.kernels;
  const AttentionShape as = attention_shape(cfg, shape);
  attention_block_ = take(w.attention, "attention scratch");
  switch (plan.ops.attention) {
    case AttentionImpl::Materialized:
      materialized_scratch_ = AttentionScratch::assigned(attention_block_, as, precision_.compute);
      break;
    case AttentionImpl::Flash:
      flash_scratch_ = flash_attention_scratch(attention_block_, as, kernels_);
      break;
    case AttentionImpl::Cudnn:
      cudnn_ = &cudnn_sdpa_for(model_sdpa_layout(cfg, shape, precision_.compute));
      cudnn_backward_planned_ = true;
      break;
    case AttentionImpl::CudnnFlash:  // one block: see workspace_sizes
      cudnn_ = &cudnn_sdpa_for(model_sdpa_layout(cfg, shape, precision_.compute));
      flash_scratch_ = flash_attention_scratch(attention_block_, as, kernels_);
      break;
    case AttentionImpl::Auto:
      throw RuntimeFailure("CudaBackend::prepare: attention auto was not resolved");
  }
  if (w.embedding_grad > 0) {
    embedding_scratch_ =
        EmbeddingGradScratch::assigned(take(w.embedding_grad, "the embedding gradient's sort"),
                                       shape.tokens(), cfg.hidden_dim, cfg.vocab_size);
  }
  if (w.rope_table > 0) {
    // Built here, once per shape, on the stream every step runs on: a
    // captured step only reads it.
    rope_table_ = RopeTable{static_cast<float*>(take(w.rope_table, "the RoPE (cos, sin) table")),
                            shape.seq, cfg.head_dim(), cfg.rope_theta};
    rope_table(rope_table_.cos_sin, shape.seq, cfg.head_dim(), cfg.rope_theta, stream_);
  }
}

void CudaBackend::assign_rms_partials(void* block, std::int64_t bytes, int hidden_dim) {
  // One set of kRmsnormPartialRows rows of hidden_dim floats, or two
  // (workspace_sizes: where the side branch sums them).
  const std::int64_t partial_floats =
      (bytes - kRmsnormCounterBytes) / static_cast<std::int64_t>(sizeof(float));
  rms_partial_sets_ =
      partial_floats >= 2 * kRmsnormPartialRows * static_cast<std::int64_t>(hidden_dim) ? 2 : 1;
  rms_partial_capacity_ = partial_floats / rms_partial_sets_;
  rms_sum_tickets_ = {-1, -1};
  rms_next_set_ = 0;
  rms_partials_ = static_cast<float*>(block);
  rms_counters_ =
      reinterpret_cast<unsigned*>(static_cast<char*>(block) + (bytes - kRmsnormCounterBytes));
  // Zero once; every backward call that counts leaves them zero again.
  CUDA_CHECK(cudaMemsetAsync(rms_counters_, 0, kRmsnormCounterBytes, stream_));
}

// The plan's kernel_launch, for every kernel this backend's streams carry:
// the main stream, the weight-gradient branch, the per-layer updates.
void CudaBackend::set_kernel_launch(bool programmatic) {
  for (cudaStream_t s :
       {stream_, side_ ? side_->stream() : nullptr, updates_ ? updates_->stream() : nullptr}) {
    if (s != nullptr) set_programmatic_launch(s, programmatic);
  }
}

std::int64_t CudaBackend::device_peak_used_bytes() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  peak_used_ = std::max(peak_used_, static_cast<std::int64_t>(total_bytes - free_bytes));
  return peak_used_;
}

std::unique_ptr<EventTimer> CudaBackend::make_timer(int marks) {
  return make_event_timer(marks, stream_);
}

std::unique_ptr<HostReadback> CudaBackend::make_readback(std::size_t bytes) {
  return std::make_unique<PinnedReadback>(stream_, bytes);
}

void* CudaBackend::allocate(std::size_t bytes) {
  return device_alloc(bytes, "a device buffer");
}

void CudaBackend::release(void* p) {
  if (p == nullptr) return;
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  CUDA_CHECK(cudaFree(p));
}

// Host exchange is setup-time or once per step: synchronous by design.
void CudaBackend::upload(void* dst, const void* host_src, std::size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::download(void* host_dst, const void* src, std::size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::fill_zero(void* dst, std::size_t bytes) {
  CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaBackend::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::upload_async(void* dst, const void* host_src, std::size_t bytes) {
  uploader_->upload(dst, host_src, bytes);
}

// Side work left unjoined (a norm's partial-row sum, which only the
// optimizer reads) is joined into the main stream at both ends of a
// recording: before it, because a wait inside a capture on an event recorded
// outside it is an error, and at its end, because a capture with unjoined
// work fails, and an event recorded in it cannot be waited on outside. A
// training step joins its side work itself; the kernel bench warms an op up
// eagerly and then records the op alone.
void CudaBackend::begin_capture() {
  side_->join_all(stream_);
  updates_->join_all(stream_);
  graph_->begin();
}

GraphStats CudaBackend::end_capture(bool instantiate, int slot) {
  side_->join_all(stream_);
  updates_->join_all(stream_);
  return graph_->end(instantiate, slot);
}

void CudaBackend::abort_capture() noexcept {
  graph_->abort();
  side_->forget_pending();
  updates_->forget_pending();
  sorted_tokens_ = SortedTokens{};  // a sort in a discarded recording never ran
}

void CudaBackend::replay(int slot) {
  graph_->launch(slot);
}

void CudaBackend::convert(Mat dst, Mat src) {
  cuda::convert(dst, src, stream_);
}

void CudaBackend::gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) {
  gemm_->run(c, a, trans_a, b, trans_b, alpha, beta);
}

void CudaBackend::gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool trans_b, Mat c) {
  gemm_->run(d, a, trans_a, b, trans_b, 1.0f, 1.0f, {}, &c);
}

std::int64_t CudaBackend::side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                    float beta) {
  fork_side_gemms();
  return side_gemm_from_fork(c, a, trans_a, b, trans_b, alpha, beta);
}

void CudaBackend::fork_side_gemms() {
  if (side_enabled_) side_->fork(stream_);
}

std::int64_t CudaBackend::side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b,
                                              float alpha, float beta) {
  if (!side_enabled_) {
    gemm_->run(c, a, trans_a, b, trans_b, alpha, beta);
    return 0;
  }
  // The side stream already waits at the fork point (fork_side_gemms).
  side_gemm_->run(c, a, trans_a, b, trans_b, alpha, beta);
  return side_->mark();
}

void CudaBackend::join_side_gemm(std::int64_t ticket) {
  if (side_enabled_) side_->join(stream_, ticket);
}

void CudaBackend::join_side_gemms() {
  if (side_enabled_) side_->join_all(stream_);
}

std::int64_t CudaBackend::side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                           const AdamWHyper& hp) {
  if (!side_enabled_) {
    cuda::adamw_fused(param, grad, m, v, compute_copy, hp, stream_);
    return 0;
  }
  updates_->fork(stream_);
  side_->order_after_pending(updates_->stream());  // the weight gradients
  cuda::adamw_fused(param, grad, m, v, compute_copy, hp, updates_->stream());
  return updates_->mark();
}

void CudaBackend::join_side_update(std::int64_t ticket) {
  if (side_enabled_) updates_->join(stream_, ticket);
}

void CudaBackend::join_side_updates() {
  if (side_enabled_) updates_->join_all(stream_);
  set_gemm_sm_margin(0);  // no exchange runs beside what follows
}

void CudaBackend::gemms_beside_exchange() {
  if (!side_enabled_) return;  // the exchange ran on the main stream, in order
  set_gemm_sm_margin(exchange_sm_margin_);
}

// Both streams' runners; the FP8 GEMMs take theirs (cuda_backend_fp8.cc).
void CudaBackend::set_gemm_sm_margin(int sms) {
  gemm_->set_sm_margin(sms);
  side_gemm_->set_sm_margin(sms);
}

// Collectives share the side-update stream with the per-layer sweeps, so a
// layer's reduce-scatter, sweep and all-gather stay in that order without
// events between them, and every NCCL call of the step is on one stream.
void* CudaBackend::begin_side_collective() {
  if (!side_enabled_) return stream_;
  updates_->fork(stream_);
  side_->order_after_pending(updates_->stream());  // the weight gradients
  return updates_->stream();
}

void CudaBackend::end_side_collective() {
  if (side_enabled_) updates_->mark();
}

}  // namespace tinyllama::cuda
