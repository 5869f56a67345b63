#include "cpu/cpu_backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "cpu/cpu_common.h"
#include "ops/attention/cpu_attention.h"
#include "ops/convert/cpu_convert.h"
#include "ops/elementwise/cpu_elementwise.h"
#include "ops/embedding/cpu_embedding.h"
#include "ops/linear/cpu_blas.h"
#include "ops/linear/cpu_fp8_linear.h"
#include "ops/linear/cpu_gemm.h"
#include "ops/loss/cpu_cross_entropy.h"
#include "ops/norm/cpu_rmsnorm.h"
#include "ops/optimizer/cpu_adamw.h"
#include "ops/optimizer/cpu_grad_norm.h"
#include "ops/rope/cpu_rope.h"
#include "ops/swiglu/cpu_swiglu.h"

namespace tinyllama {
namespace {

class SteadyClockTimer final : public EventTimer {
 public:
  explicit SteadyClockTimer(int marks) : marks_(static_cast<std::size_t>(marks)) {}
  void record(int mark) override { marks_.at(static_cast<std::size_t>(mark)) = Clock::now(); }
  double elapsed_ms(int from_mark, int to_mark) override {
    const auto d = marks_.at(static_cast<std::size_t>(to_mark)) -
                   marks_.at(static_cast<std::size_t>(from_mark));
    return std::chrono::duration<double, std::milli>(d).count();
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> marks_;
};

}  // namespace

CpuBackend::CpuBackend(CpuKernels kernels)
    : blas_(kernels == CpuKernels::Fast && cpu::blas_available()) {}

std::string CpuBackend::device_description() const {
  return "cpu (" + std::to_string(cpu::worker_count()) + " threads" +
         (blas_ ? "; fp32 GEMMs and attention on " + cpu::blas_description() : "") + ")";
}

std::unique_ptr<EventTimer> CpuBackend::make_timer(int marks) {
  return std::make_unique<SteadyClockTimer>(marks);
}

void* CpuBackend::allocate(std::size_t bytes) {
  // 64-byte alignment keeps every planned offset aligned for vector loads.
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void CpuBackend::release(void* p) {
  std::free(p);
}
void CpuBackend::upload(void* dst, const void* host_src, std::size_t bytes) {
  std::memcpy(dst, host_src, bytes);
}
void CpuBackend::download(void* host_dst, const void* src, std::size_t bytes) {
  std::memcpy(host_dst, src, bytes);
}
void CpuBackend::fill_zero(void* dst, std::size_t bytes) {
  std::memset(dst, 0, bytes);
}
void CpuBackend::upload_async(void* dst, const void* host_src, std::size_t bytes) {
  std::memcpy(dst, host_src, bytes);
}

void CpuBackend::convert(Mat dst, Mat src) {
  cpu::convert(dst, src);
}
void CpuBackend::gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) {
  if (uses_blas(c)) {
    cpu::blas_gemm(c, a, trans_a, b, trans_b, alpha, beta);
    return;
  }
  cpu::gemm(c, a, trans_a, b, trans_b, alpha, beta);
}
void CpuBackend::quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) {
  cpu::quantize_fp8_tensor(x, q, from);
}
void CpuBackend::fp8_update_scales(float* blocks, int count, Fp8Format f) {
  cpu::update_fp8_scales(blocks, count, f);
}
void CpuBackend::gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                          bool accumulate) {
  cpu::gemm_fp8_tensor(c, a, trans_a, b, trans_b, accumulate);
}
void CpuBackend::strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                              const AttentionShape& shape) {
  cpu::attention_forward(out, lse, Mat(), q, k, v, shape);
}
void CpuBackend::naive_linear(Mat out, Mat x, Mat w) {
  cpu::gemm(out, x, false, w, true, 1.0, 0.0);
}
void CpuBackend::attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q,
                                        Mat k, Mat v, Mat q_rot, Mat k_rot, Mat v_copy,
                                        const AttentionShape& shape, double rope_theta) {
  compose_attention_rope_forward(*this, impl, out, lse, probs, q, k, v, q_rot, k_rot, v_copy, shape,
                                 rope_theta);
}
void CpuBackend::add(Mat out, Mat a, Mat b) {
  cpu::add(out, a, b);
}
void CpuBackend::mul(Mat out, Mat a, Mat b) {
  cpu::mul(out, a, b);
}
void CpuBackend::embedding_forward(Mat out, const std::int32_t* tokens, Mat table) {
  cpu::embedding_forward(out, tokens, table);
}
void CpuBackend::embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) {
  cpu::embedding_backward(dtable, tokens, dout);
}
void CpuBackend::rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) {
  cpu::rmsnorm_forward(out, rstd, x, weight, eps);
}
void CpuBackend::rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) {
  cpu::rmsnorm_backward(dx, dweight, dout, x, weight, rstd);
}
// The fused norm ops: the forward is the reference add, then the reference
// norm; the backward is the reference norm backward with the residual
// gradient added before its one rounding, as the CUDA kernel does (and no
// scratch buffer inside a step).
void CpuBackend::rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) {
  cpu::rmsnorm_apply(out, x, weight, rstd);
}

void CpuBackend::add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                                     double eps) {
  cpu::add(sum, a, b);
  cpu::rmsnorm_forward(out, rstd, sum, weight, eps);
}
void CpuBackend::rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                                      Mat dresidual) {
  cpu::rmsnorm_backward(dx, dweight, dout, x, weight, rstd, dresidual);
}
void CpuBackend::rope_forward(Mat x, int seq, int head_dim, double theta) {
  cpu::rope(x, seq, head_dim, theta, +1);
}
void CpuBackend::rope_backward(Mat dx, int seq, int head_dim, double theta) {
  cpu::rope(dx, seq, head_dim, theta, -1);
}
void CpuBackend::attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k,
                                   Mat v, const AttentionShape& shape) {
  require_probs_match(impl, probs, "attention_forward");
  if (uses_blas(q)) {
    cpu::attention_forward_blas(out, lse, probs, q, k, v, shape);
    return;
  }
  cpu::attention_forward(out, lse, probs, q, k, v, shape);
}
void CpuBackend::attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                                    Mat k, Mat v, Mat /*out*/, Mat lse, Mat probs,
                                    const AttentionShape& shape) {
  require_probs_match(impl, probs, "attention_backward");
  if (uses_blas(q)) {
    cpu::attention_backward_blas(dq, dk, dv, dout, q, k, v, lse, probs, shape);
    return;
  }
  cpu::attention_backward(dq, dk, dv, dout, q, k, v, lse, probs, shape);
}
void CpuBackend::silu_forward(Mat out, Mat x) {
  cpu::silu_forward(out, x);
}
void CpuBackend::silu_backward(Mat dx, Mat dout, Mat x) {
  cpu::silu_backward(dx, dout, x);
}
void CpuBackend::swiglu_forward(Mat out, Mat gate, Mat up) {
  cpu::swiglu_forward(out, gate, up);
}
void CpuBackend::swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) {
  cpu::swiglu_backward(dgate, dup, dout, gate, up);
}
void CpuBackend::cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) {
  cpu::cross_entropy_forward(losses, logits, targets);
}
void CpuBackend::cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                        float scale) {
  cpu::cross_entropy_backward(dlogits, logits, targets, scale);
}
void CpuBackend::cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                        const StepScalars* step) {
  cpu::cross_entropy_backward(dlogits, logits, targets, step->ce_grad_scale);
}
void CpuBackend::cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                                     const StepScalars* step) {
  cpu::cross_entropy_forward(losses, logits, targets);
  cpu::cross_entropy_backward(logits, logits, targets, step->ce_grad_scale);
}
void CpuBackend::adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) {
  if (hp.scalars == nullptr) {
    cpu::adamw(param, grad, m, v, hp);
    return;
  }
  // The scalars keep the host's lr, step and grad_scale exactly, so the
  // reference computes from the very values it was always given.
  AdamWHyper by_value = hp;
  by_value.lr = static_cast<float>(hp.scalars->lr);
  by_value.step = hp.scalars->step;
  by_value.grad_scale = static_cast<float>(hp.scalars->grad_scale);
  by_value.scalars = nullptr;
  cpu::adamw(param, grad, m, v, by_value, hp.scalars->clip);
}
void CpuBackend::flag_nonfinite(Mat x, std::int32_t* flag) {
  cpu::flag_nonfinite(x, flag);
}
void CpuBackend::sum_squares(Mat x, double* acc) {
  cpu::sum_squares(x, acc);
}
void CpuBackend::clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) {
  cpu::clip_by_norm(acc, max_norm, step, norm);
}

}  // namespace tinyllama
