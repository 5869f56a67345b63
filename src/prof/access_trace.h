#pragma once
// A Backend that computes nothing and records which memory each op of a step
// reads and writes, and what each call costs (prof/call_cost.h), under the
// name of the op marker it ran in. Running the model's passes on it once
// gives the step's exact op sequence -- the same calls the CPU and CUDA
// backends get, since the passes are one code path -- from which the memory
// timeline derives each activation buffer's lifetime
// (prof/memory_timeline.h) and the cost model each op's FLOPs and bytes
// (prof/cost_model.h).
//
// Its allocations are address space reserved without access (mmap
// PROT_NONE): the recorded pointers are real and distinct, a 1 B-parameter
// model costs no memory, and anything that touched the bytes would fault
// loudly instead of reading garbage.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/op_marker.h"
#include "model/backend.h"
#include "prof/call_cost.h"

namespace tinyllama::prof {

// One block an op read or wrote: `rows` rows of `row_bytes` bytes, each
// `stride_bytes` after the last (a Mat's view in bytes).
struct MemoryAccess {
  const char* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t row_bytes = 0;
  std::int64_t stride_bytes = 0;
  bool write = false;
};

// The backend calls made inside one opening of an op marker, in order, and
// their summed cost.
struct TracedOp {
  std::string name;  // the marker path, "forward/layer3/qkv_gemm"
  std::vector<MemoryAccess> accesses;
  CallCost cost;
};

class AccessTraceBackend final : public Backend, public ExerciseOps, private OpObserver {
 public:
  // Reports the device (and its caps) the traced plan was resolved for.
  explicit AccessTraceBackend(const DeviceCaps& caps) : caps_(caps) {}
  ~AccessTraceBackend() override;
  AccessTraceBackend(const AccessTraceBackend&) = delete;
  AccessTraceBackend& operator=(const AccessTraceBackend&) = delete;

  // Records ops while alive; restores the observer it replaced (the
  // profiler's, if any) on destruction.
  class Recording {
   public:
    explicit Recording(AccessTraceBackend& backend);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    OpObserver* previous_;
  };

  // The ops that touched memory, in the order they ran; ops of one marker
  // opened several times (a layer's, each chunk's) appear once per opening.
  const std::vector<TracedOp>& ops() const { return ops_; }

  // --- Backend ---------------------------------------------------------------
  ExerciseOps* exercise_ops() override { return this; }
  std::string name() const override { return "trace"; }
  std::string device_description() const override { return "access trace (computes nothing)"; }
  DeviceCaps caps() const override { return caps_; }
  void prepare(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) override;
  std::int64_t workspace_bytes() const override { return workspace_bytes_; }
  std::int64_t device_peak_used_bytes() override { return -1; }
  std::unique_ptr<EventTimer> make_timer(int marks) override;
  std::unique_ptr<HostReadback> make_readback(std::size_t bytes) override;
  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void upload(void*, const void*, std::size_t) override {}
  void download(void*, const void*, std::size_t) override {}
  void fill_zero(void*, std::size_t) override {}
  void upload_async(void*, const void*, std::size_t) override {}
  void convert(Mat dst, Mat src) override;
  // The LM head's GEMMs are charged over the vocabulary's rows, not the
  // padded table's: the padding is not model work (6·N·T counts the
  // vocabulary), as cost_model.h says.
  void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) override;
  void gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool trans_b, Mat c) override;
  // FP8 codes are a byte each; the scalars are read and written too.
  void quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) override;
  void fp8_update_scales(float* blocks, int count, Fp8Format f) override;
  void gemm_fp8_add(Mat d, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                    Mat c) override;
  void gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                bool accumulate) override;
  // The exercise faults' slow kernels touch what the ops they replace touch.
  void naive_linear(Mat out, Mat x, Mat w) override;
  void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                    const AttentionShape& shape) override;
  // The composition (compose_attention_rope_forward): its ops' accesses.
  void attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                              Mat q_rot, Mat k_rot, Mat v_copy, const AttentionShape& shape,
                              double rope_theta) override;
  void add(Mat out, Mat a, Mat b) override;
  void mul(Mat out, Mat a, Mat b) override;
  void embedding_forward(Mat out, const std::int32_t* tokens, Mat table) override;
  void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) override;
  void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) override;
  void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) override;
  void add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                           double eps) override;
  void rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                            Mat dresidual) override;
  void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) override;
  void rope_forward(Mat x, int seq, int head_dim, double theta) override;
  void rope_backward(Mat dx, int seq, int head_dim, double theta) override;
  void attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                         const AttentionShape& shape) override;
  void attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v,
                          Mat out, Mat lse, Mat probs, const AttentionShape& shape) override;
  // One op: attention_backward's accesses, no pass over dq and dk after it.
  void attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k,
                               Mat v, Mat out, Mat lse, Mat probs, const AttentionShape& shape,
                               double rope_theta) override;
  void silu_forward(Mat out, Mat x) override;
  void silu_backward(Mat dx, Mat dout, Mat x) override;
  void swiglu_forward(Mat out, Mat gate, Mat up) override;
  void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) override;
  // As the CUDA backend runs them: one pass writing the codes (and the bf16
  // result only when kept) where the scale is known before it, else the
  // SwiGLU op and the cast.
  void rmsnorm_forward_fp8(Mat out, Mat rstd, Mat x, Mat weight, double eps, const Fp8Tensor& q,
                           Fp8ScaleFrom from, bool keep_out) override;
  void rmsnorm_apply_fp8(Mat out, Mat x, Mat weight, Mat rstd, const Fp8Tensor& q,
                         Fp8ScaleFrom from, bool keep_out) override;
  void swiglu_forward_fp8(Mat hidden, Mat gate, Mat up, const Fp8Tensor& q, Fp8ScaleFrom from,
                          bool keep_hidden) override;
  void swiglu_backward_fp8(Mat d_gate_up, Mat dout, Mat gate, Mat up, const Fp8Tensor& q,
                           Fp8ScaleFrom from, bool keep_grads) override;
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
  // SwigluImpl::Gemm: the accesses of the composition (the GEMM, then the
  // SwiGLU), the cost of the one kernel that does both.
  void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu) override;
  void gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                            Mat gate_up) override;
  void flag_nonfinite(Mat x, std::int32_t* flag) override;
  void sum_squares(Mat x, double* acc) override;
  void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) override;

  // A host readback's copy: a read of `bytes` at src by the current op.
  void record_read(const void* src, std::size_t bytes);
  // The copies of q the flags name (codes, codes_t) and its scalars.
  void record_fused_cast(const Fp8Tensor& q, Fp8ScaleFrom from);
  void record_fp8(const Fp8Tensor& q, bool direct, bool transposed, bool write);

 private:
  int open(const char* name) override;
  void close(int handle) noexcept override;
  // The op the next access belongs to: the innermost open marker's, made
  // on its first access.
  TracedOp& current_op();
  void record(std::initializer_list<Mat> mats, bool write);
  // Adds a call's cost to the current op (not while a composed op's parts
  // run: it charges its own).
  void charge(const CallCost& cost);
  void reads(std::initializer_list<Mat> mats) { record(mats, false); }
  void writes(std::initializer_list<Mat> mats) { record(mats, true); }

  DeviceCaps caps_;
  std::int64_t workspace_bytes_ = 0;
  // The LM head's GEMMs run over the table's padded rows; the cost counts
  // the vocabulary's (head_gemm_cost).
  std::int64_t vocab_ = 0, padded_vocab_ = 0;
  bool sorted_embedding_grad_ = false;  // EmbeddingGradImpl::Sorted: its partial sums

  CallCost head_gemm_cost(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float beta);
  bool charging_ = true;
  struct Reservation {
    void* base;
    std::size_t bytes;
  };
  std::vector<Reservation> reservations_;
  std::vector<TracedOp> ops_;
  // Open markers: their path and the op index made for them (-1: none yet).
  struct OpenMarker {
    std::string path;
    int op = -1;
  };
  std::vector<OpenMarker> open_;
};

}  // namespace tinyllama::prof
