#pragma once
// The CPU backend: host memory, the plain loops of src/cpu, a steady clock
// for timing. Computes in float32 or float64 (gradient checks).
//
// Two kinds: Reference (the default) runs every op on the exact loops, the
// reference that the fp64 gradient checks, the CUDA tests and the kernel
// bench compare against. Fast (what `tinyllama train --device cpu` runs)
// takes float32 GEMMs and attention through BLAS (cpu_blas.h) when the
// build has one; float64 and every other op stay on the loops either way.
#include <memory>
#include <string>

#include "model/backend.h"

namespace tinyllama {

enum class CpuKernels { Reference, Fast };

// Not final: tests derive from it to run side GEMMs as late as the
// Backend contract allows (tests/model/side_gemm_order_test.cc). Its
// exercise ops (model/exercise_ops.h) are the references of the CUDA ones.
class CpuBackend : public Backend, public ExerciseOps {
 public:
  explicit CpuBackend(CpuKernels kernels = CpuKernels::Reference);

  ExerciseOps* exercise_ops() override { return this; }

  std::string name() const override { return "cpu"; }
  std::string device_description() const override;

  DeviceCaps caps() const override { return DeviceCaps::cpu(); }
  void prepare(const ModelConfig&, BatchShape, const StepPlan&) override {}
  std::int64_t workspace_bytes() const override { return 0; }
  std::int64_t device_peak_used_bytes() override { return -1; }
  std::unique_ptr<EventTimer> make_timer(int marks) override;

  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void upload(void* dst, const void* host_src, std::size_t bytes) override;
  void download(void* host_dst, const void* src, std::size_t bytes) override;
  void fill_zero(void* dst, std::size_t bytes) override;
  // Host memory is the device here: a plain copy, done when it returns.
  void upload_async(void* dst, const void* host_src, std::size_t bytes) override;

  void convert(Mat dst, Mat src) override;
  void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) override;
  void quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) override;
  void fp8_update_scales(float* blocks, int count, Fp8Format f) override;
  void gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                bool accumulate) override;
  // The reference loops, never BLAS (naive-swiglu on the CPU).
  void naive_linear(Mat out, Mat x, Mat w) override;
  void add(Mat out, Mat a, Mat b) override;
  void mul(Mat out, Mat a, Mat b) override;
  void embedding_forward(Mat out, const std::int32_t* tokens, Mat table) override;
  void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) override;
  void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) override;
  void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) override;
  void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) override;
  void add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                           double eps) override;
  void rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                            Mat dresidual) override;
  void rope_forward(Mat x, int seq, int head_dim, double theta) override;
  void rope_backward(Mat dx, int seq, int head_dim, double theta) override;
  // Both implementations: P from probs (materialised) or recomputed from
  // lse like the flash kernels, so each has a reference.
  void attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                         const AttentionShape& shape) override;
  void attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v,
                          Mat out, Mat lse, Mat probs, const AttentionShape& shape) override;
  // The reference loops, never BLAS (noncontiguous-kv on the CPU).
  void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                    const AttentionShape& shape) override;
  // The composition (compose_attention_rope_forward), the reference.
  void attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                              Mat q_rot, Mat k_rot, Mat v_copy, const AttentionShape& shape,
                              double rope_theta) override;
  void silu_forward(Mat out, Mat x) override;
  void silu_backward(Mat dx, Mat dout, Mat x) override;
  void swiglu_forward(Mat out, Mat gate, Mat up) override;
  void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) override;
  void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) override;
  void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                              float scale) override;
  void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                              const StepScalars* step) override;
  void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                           const StepScalars* step) override;
  void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) override;
  void flag_nonfinite(Mat x, std::int32_t* flag) override;
  void sum_squares(Mat x, double* acc) override;
  void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) override;

 private:
  bool uses_blas(const Mat& m) const { return blas_ && m.dtype == DType::F32; }
  bool blas_ = false;  // Fast, in a build with a BLAS
};

}  // namespace tinyllama
