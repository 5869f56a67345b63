#pragma once
// The CUDA backend: every op of the Backend interface on the GPU, in fp32,
// bf16 and fp16. All work goes to one stream the backend owns, so that it
// can be captured into a graph; with CUDA graphs on, the weight-gradient
// GEMMs (side_gemm) go to a second stream forked from and joined to it.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "device/cuda_graph.h"
#include "device/cuda_side_branch.h"
#include "model/backend.h"
#include "ops/attention/cuda_attention.h"
#include "ops/attention/cuda_strided_kv_attention.h"
#include "ops/attention/cudnn/cudnn_sdpa.h"
#include "ops/attention/flash/flash_attention.h"
#include "ops/convert/cuda_convert.h"
#include "ops/elementwise/cuda_elementwise.h"
#include "ops/embedding/cuda_embedding.h"
#include "ops/linear/cuda_gemm.h"
#include "ops/linear/cuda_gemm_fp8.h"
#include "ops/linear/cuda_naive_linear.h"
#include "ops/loss/cuda_cross_entropy.h"
#include "ops/norm/cuda_rmsnorm.h"
#include "ops/optimizer/cuda_adamw.h"
#include "ops/optimizer/cuda_grad_norm.h"
#include "ops/swiglu/cuda_swiglu.h"

namespace tinyllama::cuda {

// "NVIDIA H100 80GB HBM3 (79.2 GiB, sm_90)"
std::string describe_device(int device);

class CudaBackend final : public Backend, public ExerciseOps {
 public:
  explicit CudaBackend(Precision precision);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  ExerciseOps* exercise_ops() override { return this; }

  cudaStream_t stream() const { return stream_; }
  GemmRunner& gemm_runner() { return *gemm_; }

  std::string name() const override { return "cuda"; }
  std::string device_description() const override;
  DeviceCaps caps() const override;
  void prepare(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) override;
  std::int64_t workspace_bytes() const override { return workspace_bytes_; }
  std::int64_t device_peak_used_bytes() override;
  std::unique_ptr<EventTimer> make_timer(int marks) override;
  std::unique_ptr<HostReadback> make_readback(std::size_t bytes) override;

  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void upload(void* dst, const void* host_src, std::size_t bytes) override;
  void download(void* host_dst, const void* src, std::size_t bytes) override;
  void fill_zero(void* dst, std::size_t bytes) override;
  void synchronize() override;
  void upload_async(void* dst, const void* host_src, std::size_t bytes) override;

  bool supports_graphs() const override { return true; }
  void begin_capture() override;
  GraphStats end_capture(bool instantiate, int slot) override;
  void abort_capture() noexcept override;
  void replay(int slot) override;

  void convert(Mat dst, Mat src) override;
  void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) override;
  void gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool trans_b, Mat c) override;
  void naive_linear(Mat out, Mat x, Mat w) override;
  void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                    const AttentionShape& shape) override;
  // On the side stream when the plan has parallel branches, else gemm().
  std::int64_t side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                         float beta) override;
  void fork_side_gemms() override;
  std::int64_t side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                   float beta) override;
  void join_side_gemm(std::int64_t ticket) override;
  void join_side_gemms() override;
  // The FP8 linear ops (cuda_backend_fp8.cc): the casts of cuda_fp8_cast.h
  // and cuBLASLt's FP8 GEMM (Fp8GemmRunner), one per stream.
  void quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) override;
  void fp8_update_scales(float* blocks, int count, Fp8Format f) override;
  void gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                bool accumulate) override;
  void gemm_fp8_add(Mat d, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                    Mat c) override;
  std::int64_t side_gemm_fp8_from_fork(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                                       bool trans_b, bool accumulate) override;
  std::int64_t side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                const AdamWHyper& hp) override;
  void join_side_update(std::int64_t ticket) override;
  void join_side_updates() override;
  void* begin_side_collective() override;
  void end_side_collective() override;
  void gemms_beside_exchange() override;
  void* main_stream_handle() override { return stream_; }
  void add(Mat out, Mat a, Mat b) override;
  void mul(Mat out, Mat a, Mat b) override;
  void embedding_forward(Mat out, const std::int32_t* tokens, Mat table) override;
  void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) override;
  void embedding_backward_prepare(const std::int32_t* tokens, std::int64_t n,
                                  std::int64_t vocab) override;
  std::string tuning_state() const override;
  std::string restore_tuning_state(const std::string& text) override;
  void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) override;
  void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) override;
  void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) override;
  void add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                           double eps) override;
  void rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                            Mat dresidual) override;
  void rope_forward(Mat x, int seq, int head_dim, double theta) override;
  void rope_backward(Mat dx, int seq, int head_dim, double theta) override;
  void attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                         const AttentionShape& shape) override;
  void attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v,
                          Mat out, Mat lse, Mat probs, const AttentionShape& shape) override;
  // Flash: the rotation as the flash kernels load their Q and K tiles,
  // through the table prepare() built (a plan with rope fused); others: the
  // composition. The kernel bench's variant; the model rotates separately.
  void attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                              Mat q_rot, Mat k_rot, Mat v_copy, const AttentionShape& shape,
                              double rope_theta) override;
  // Flash: the inverse RoPE in the flash kernels' epilogues, through the
  // table prepare() built (a plan with rope fused); others: the composition.
  void attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k,
                               Mat v, Mat out, Mat lse, Mat probs, const AttentionShape& shape,
                               double rope_theta) override;
  void silu_forward(Mat out, Mat x) override;
  void silu_backward(Mat dx, Mat dout, Mat x) override;
  void swiglu_forward(Mat out, Mat gate, Mat up) override;
  void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) override;
  // One kernel each (ops/swiglu/cuda_swiglu_fp8.cu) where the scale is
  // known before the pass and the tiles fit; else the two ops.
  void swiglu_forward_fp8(Mat hidden, Mat gate, Mat up, const Fp8Tensor& q, Fp8ScaleFrom from,
                          bool keep_hidden) override;
  // One kernel (ops/norm/cuda_rmsnorm_fp8.cu), as the SwiGLU's above.
  void rmsnorm_apply_fp8(Mat out, Mat x, Mat weight, Mat rstd, const Fp8Tensor& q,
                         Fp8ScaleFrom from, bool keep_out) override;
  void rmsnorm_forward_fp8(Mat out, Mat rstd, Mat x, Mat weight, double eps, const Fp8Tensor& q,
                           Fp8ScaleFrom from, bool keep_out) override;
  void swiglu_backward_fp8(Mat d_gate_up, Mat dout, Mat gate, Mat up, const Fp8Tensor& q,
                           Fp8ScaleFrom from, bool keep_grads) override;
  // One Hopper kernel each (ops/swiglu/swiglu_gemm) where it takes the operands,
  // else the composed default.
  void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu) override;
  void gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                            Mat gate_up) override;
  void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) override;
  void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                              float scale) override;
  void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                              const StepScalars* step) override;
  void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                           const StepScalars* step) override;
  void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) override;
  void adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                   const AdamWHyper& hp) override;
  void flag_nonfinite(Mat x, std::int32_t* flag) override;
  void sum_squares(Mat x, double* acc) override;
  void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) override;

 private:
  void free_workspaces();
  // rmsnorm_backward(_add)'s body: the partial rows' sum on the side branch.
  void norm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd, Mat dresidual);
  // KernelLaunch::Pdl on (or off) for the kernels of this backend's streams.
  void set_kernel_launch(bool programmatic);
  // The SMs both streams' GEMM runners leave from now on (gemms_beside_exchange).
  void set_gemm_sm_margin(int sms);
  // The RMSNorm weight-gradient partial sums and their counters in `block`
  // (`bytes`, workspace_sizes's rms_partials), for rows of hidden_dim.
  void assign_rms_partials(void* block, std::int64_t bytes, int hidden_dim);

  Precision precision_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmRunner> gemm_;
  std::unique_ptr<PinnedUploader> uploader_;  // upload_async
  std::unique_ptr<GraphRecorder> graph_;      // whole-step capture and replay
  // Weight-gradient GEMMs beside the main stream: their own stream, and a
  // runner with its own cuBLASLt workspace (two GEMMs in flight must not
  // share one). Algorithm choices are process-wide, so a GEMM gives the
  // same bits on either runner.
  std::unique_ptr<SideBranch> side_;
  std::unique_ptr<GemmRunner> side_gemm_;
  // FP8 GEMMs, each sharing the workspace of the GemmRunner on its stream.
  std::unique_ptr<cuda::Fp8GemmRunner> fp8_gemm_;
  std::unique_ptr<cuda::Fp8GemmRunner> side_fp8_gemm_;
  // Per-layer optimizer sweeps during the backward pass: a third stream, so
  // that they wait neither for nor in front of the weight-gradient GEMMs.
  std::unique_ptr<SideBranch> updates_;
  bool side_enabled_ = false;   // both branches: StepPlan::parallel_branches
  int exchange_sm_margin_ = 0;  // StepPlan::parallel.gemm_sm_margin: gemms_beside_exchange

  // prepare()'s allocations: cuBLASLt workspace, RMSNorm partial sums,
  // attention scratch, the sorted embedding gradient's scratch.
  void* gemm_workspace_ = nullptr;
  void* side_gemm_workspace_ = nullptr;
  void* gemm_tune_scratch_ = nullptr;  // GEMM autotuning of beta != 0 problems
  float* rms_partials_ = nullptr;
  std::int64_t rms_partial_capacity_ = 0;  // floats per set
  int rms_partial_sets_ = 1;               // 2 with parallel branches: see norm_backward
  int rms_next_set_ = 0;
  std::array<std::int64_t, 2> rms_sum_tickets_{-1, -1};  // the side sum that last read each set
  unsigned* rms_counters_ = nullptr;                     // the in-kernel sum's, after the partials
  void* attention_block_ = nullptr;
  const CudnnSdpa& prepared_cudnn(const char* op) const;
  // Throws unless prepare() built the RoPE table for rope_theta.
  void require_rope_table(const char* op, double rope_theta) const;
  AttentionScratch materialized_scratch_;  // the plan's attention decides which is set
  FlashScratch flash_scratch_;
  // The plan's kernel families (flash attention's, the SwiGLU GEMM's), from prepare().
  KernelChoices kernels_;
  // What this device can do (cuda_device_caps()), read once: the SwiGLU
  // GEMM's operands are checked against it.
  DeviceCaps facts_;
  RopeTable rope_table_;  // rope fused: built once in prepare(), read by the flash backward
  const CudnnSdpa* cudnn_ = nullptr;  // cudnn_sdpa_for()'s, workspace in attention_block_
  // attention cudnn+flash plans cuDNN's forward workspace only.
  bool cudnn_backward_planned_ = false;
  // Set when the plan's embedding gradient is sorted; empty (the scan
  // kernel, which needs none) before prepare() and for embedding_grad scan.
  EmbeddingGradScratch embedding_scratch_;
  // What embedding_backward_prepare sorted into the scratch (tokens null:
  // nothing), and its ticket on the update stream when it ran there.
  struct SortedTokens {
    const std::int32_t* tokens = nullptr;
    std::int64_t n = 0, vocab = 0, ticket = -1;
  } sorted_tokens_;
  std::int64_t workspace_bytes_ = 0;

  std::int64_t peak_used_ = -1;
};

}  // namespace tinyllama::cuda
