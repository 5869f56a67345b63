#pragma once
// The float64 reference ops with every value the model stores rounded to a
// low-precision compute dtype: each op's output (activations, their
// gradients, the weight gradients) is rounded after the exact op, as a
// bf16/fp16 run stores it; statistics (rstd, log-sum-exp, per-row losses)
// stay exact, as they stay fp32 on the GPU. With weights rounded the same
// way on the way in (round_to_dtype), its error against the exact fp64 run
// is the error that storing values in that dtype costs by itself.
//
// `validate` uses it where tests/python/test_parity.py uses PyTorch
// autocast: as the baseline error of a mixed-precision run (model/
// tolerance.h, amp_limit), measured on the same weights and batch without
// torch. It rounds at least everywhere autocast does (autocast keeps the
// residual stream and the norm weights in fp32), so its error is not below
// autocast's.
#include <memory>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"

namespace tinyllama {

// Each element rounded to nearest-even in `dtype` and back (bf16, fp16).
void round_to_dtype(std::vector<double>& values, DType dtype);

class RoundingBackend final : public Backend {
 public:
  explicit RoundingBackend(DType rounded);

  std::string name() const override { return "cpu-rounding"; }
  std::string device_description() const override;
  DeviceCaps caps() const override { return DeviceCaps::cpu(); }
  void prepare(const ModelConfig& c, BatchShape s, const StepPlan& p) override {
    exact_.prepare(c, s, p);
  }
  std::int64_t workspace_bytes() const override { return 0; }
  std::int64_t device_peak_used_bytes() override { return -1; }
  std::unique_ptr<EventTimer> make_timer(int marks) override { return exact_.make_timer(marks); }

  void* allocate(std::size_t bytes) override { return exact_.allocate(bytes); }
  void release(void* p) override { exact_.release(p); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    exact_.upload(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    exact_.download(dst, src, bytes);
  }
  void fill_zero(void* dst, std::size_t bytes) override { exact_.fill_zero(dst, bytes); }
  void upload_async(void* dst, const void* src, std::size_t bytes) override {
    exact_.upload_async(dst, src, bytes);
  }

  void convert(Mat dst, Mat src) override;
  void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) override;
  void quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) override {
    exact_.quantize_fp8(x, q, from);
  }
  void fp8_update_scales(float* blocks, int count, Fp8Format f) override {
    exact_.fp8_update_scales(blocks, count, f);
  }
  void gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                bool accumulate) override;
  void add(Mat out, Mat a, Mat b) override;
  void mul(Mat out, Mat a, Mat b) override;
  void embedding_forward(Mat out, const std::int32_t* tokens, Mat table) override;
  void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) override;
  void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) override;
  void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) override;
  void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) override;
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
  void round(Mat m) const;  // in place, a float64 view
  CpuBackend exact_;
  DType rounded_;
};

}  // namespace tinyllama
