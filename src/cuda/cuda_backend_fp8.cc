// The CUDA backend's FP8 linear ops (LinearOps::quantize_fp8, gemm_fp8):
// amax, scale and casts from cuda_fp8_cast.h, the GEMM on cuBLASLt
// (cuda_gemm_fp8.h). Under current scaling a quantisation is three
// launches: the amax (a pass over x), the scale (one thread), the cast (a
// second pass, writing the copies asked for); under delayed scaling one:
// the cast, raising the block's amax as it reads.
#include <stdexcept>
#include <string>

#include "core/errors.h"
#include "cuda/cuda_backend.h"
#include "device/cuda_check.h"
#include "ops/linear/cuda_fp8_cast.h"
#include "ops/norm/cuda_rmsnorm.h"
#include "ops/swiglu/cuda_swiglu.h"

namespace tinyllama::cuda {
namespace {

// The copy of t a GEMM operand reads: its rows run along the summed
// dimension (cuBLASLt's FP8 GEMM is TN only).
cuda::Fp8Operand fp8_operand(const Fp8Tensor& t, bool transposed) {
  cuda::Fp8Operand o;
  o.codes = transposed ? t.codes_t : t.codes;
  o.rows = transposed ? t.cols : t.rows;
  o.cols = transposed ? t.rows : t.cols;
  o.ld = transposed ? t.ld_t : t.ld;
  o.format = t.format;
  o.dequant = t.scalars + kFp8Inverse;
  if (o.codes == nullptr) {
    throw RuntimeFailure(std::string("gemm_fp8: an operand has no ") +
                         (transposed ? "transposed" : "row-major") + " copy");
  }
  return o;
}

void require_fp8_shape(const char* op, const Fp8Tensor& q, std::int64_t rows, std::int64_t cols) {
  if (q.rows != rows || q.cols != cols) {
    throw std::invalid_argument(std::string(op) + ": the FP8 tensor is " + std::to_string(q.rows) +
                                " x " + std::to_string(q.cols) + ", its source " +
                                std::to_string(rows) + " x " + std::to_string(cols));
  }
}

// The amax a cast with this scale source raises (delayed scaling's record).
float* recorded_amax(const Fp8Tensor& q, Fp8ScaleFrom from) {
  return from == Fp8ScaleFrom::History ? q.scalars + kFp8Amax : nullptr;
}

// The options of an FP8 GEMM: it leaves the SMs the 16-bit GEMMs of its
// stream leave now (set while an exchange runs: gemms_beside_exchange).
cuda::Fp8GemmOptions fp8_options(bool accumulate, int sm_margin) {
  cuda::Fp8GemmOptions o;
  o.accumulate = accumulate;
  o.sm_margin = sm_margin;
  return o;
}

}  // namespace

void CudaBackend::quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) {
  const cuda::Fp8Source source =
      q.rounds_to_bf16 ? cuda::Fp8Source::Bf16OfF32 : cuda::Fp8Source::AsStored;
  if (from == Fp8ScaleFrom::Amax) {
    cuda::fp8_amax(x, q.scalars + kFp8Amax, stream_, source);
    cuda::fp8_scale_from_amax(q.scalars + kFp8Amax, q.format, 0, q.scalars + kFp8Scale,
                              q.scalars + kFp8Inverse, stream_);
  }
  const float* scale = q.scalars + kFp8Scale;
  float* amax = recorded_amax(q, from);
  if (q.codes_t == nullptr) {
    cuda::fp8_cast(x, scale, q.format, cuda::Fp8View{q.codes, q.ld}, stream_, amax, source);
    return;
  }
  cuda::fp8_cast_transpose(x, scale, q.format, cuda::Fp8View{q.codes, q.ld},
                           cuda::Fp8View{q.codes_t, q.ld_t}, stream_, amax, source);
}

namespace {

// One fused FP8 producer (a SwiGLU kernel writing the codes of what it
// computes): pass(amax, out, out_t) launches it, false where it does not
// take the views. Current scaling (the first step of delayed scaling too)
// needs the whole result's amax before the first code: a pass that writes
// nothing and records only the amax, the scale, then the codes -- the same
// amax, scale and codes as the op followed by the cast, without the bf16
// result where it is not kept.
template <typename Pass>
bool fused_fp8_producer(const Fp8Tensor& q, Fp8ScaleFrom from, float* recorded, cudaStream_t stream,
                        const Pass& pass) {
  const cuda::Fp8View out{q.codes, q.ld}, out_t{q.codes_t, q.ld_t};
  if (from != Fp8ScaleFrom::Amax) return pass(recorded, out, out_t);
  float* amax = q.scalars + kFp8Amax;
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (!pass(amax, cuda::Fp8View{}, cuda::Fp8View{})) return false;
  cuda::fp8_scale_from_amax(amax, q.format, 0, q.scalars + kFp8Scale, q.scalars + kFp8Inverse,
                            stream);
  return pass(nullptr, out, out_t);
}

}  // namespace

// Where the fused kernel's tiles do not fit: the two ops.
void CudaBackend::swiglu_forward_fp8(Mat hidden, Mat gate, Mat up, const Fp8Tensor& q,
                                     Fp8ScaleFrom from, bool keep_hidden) {
  require_fp8_shape("swiglu_forward_fp8", q, hidden.rows, hidden.cols);
  const auto pass = [&](float* amax, cuda::Fp8View out, cuda::Fp8View out_t) {
    const bool keep = keep_hidden && (out.codes != nullptr || out_t.codes != nullptr);
    return cuda::try_swiglu_forward_fp8(hidden, keep, gate, up, q.scalars + kFp8Scale, q.format,
                                        out, out_t, amax, stream_);
  };
  if (fused_fp8_producer(q, from, recorded_amax(q, from), stream_, pass)) return;
  Backend::swiglu_forward_fp8(hidden, gate, up, q, from, keep_hidden);
}

void CudaBackend::swiglu_backward_fp8(Mat d_gate_up, Mat dout, Mat gate, Mat up, const Fp8Tensor& q,
                                      Fp8ScaleFrom from, bool keep_grads) {
  require_fp8_shape("swiglu_backward_fp8", q, d_gate_up.rows, d_gate_up.cols);
  const std::int64_t f = dout.cols;
  const Mat d_gate = d_gate_up.col_block(0, f), d_up = d_gate_up.col_block(f, f);
  const auto pass = [&](float* amax, cuda::Fp8View out, cuda::Fp8View out_t) {
    const bool keep = keep_grads && (out.codes != nullptr || out_t.codes != nullptr);
    return cuda::try_swiglu_backward_fp8(d_gate, d_up, keep, dout, gate, up, q.scalars + kFp8Scale,
                                         q.format, out, out_t, amax, stream_);
  };
  if (fused_fp8_producer(q, from, recorded_amax(q, from), stream_, pass)) return;
  Backend::swiglu_backward_fp8(d_gate_up, dout, gate, up, q, from, keep_grads);
}

// The row-major copy only: a copy a forward GEMM reads.
void CudaBackend::rmsnorm_forward_fp8(Mat out, Mat rstd, Mat x, Mat weight, double eps,
                                      const Fp8Tensor& q, Fp8ScaleFrom from, bool keep_out) {
  require_fp8_shape("rmsnorm_forward_fp8", q, x.rows, x.cols);
  if (from != Fp8ScaleFrom::Amax && q.codes_t == nullptr && q.codes != nullptr &&
      cuda::try_rmsnorm_forward_fp8(out, keep_out, rstd, x, weight, eps, q.scalars + kFp8Scale,
                                    q.format, cuda::Fp8View{q.codes, q.ld}, recorded_amax(q, from),
                                    stream_)) {
    return;
  }
  Backend::rmsnorm_forward_fp8(out, rstd, x, weight, eps, q, from, keep_out);
}

void CudaBackend::rmsnorm_apply_fp8(Mat out, Mat x, Mat weight, Mat rstd, const Fp8Tensor& q,
                                    Fp8ScaleFrom from, bool keep_out) {
  require_fp8_shape("rmsnorm_apply_fp8", q, x.rows, x.cols);
  if (from != Fp8ScaleFrom::Amax &&
      cuda::try_rmsnorm_apply_fp8(out, keep_out, x, weight, rstd, q.scalars + kFp8Scale, q.format,
                                  cuda::Fp8View{q.codes, q.ld}, cuda::Fp8View{q.codes_t, q.ld_t},
                                  recorded_amax(q, from), stream_)) {
    return;
  }
  Backend::rmsnorm_apply_fp8(out, x, weight, rstd, q, from, keep_out);
}

void CudaBackend::fp8_update_scales(float* blocks, int count, Fp8Format f) {
  cuda::fp8_update_scales(blocks, count, f, stream_);
}

void CudaBackend::gemm_fp8(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                           bool trans_b, bool accumulate) {
  fp8_gemm_->run(c, fp8_operand(a, trans_a), fp8_operand(b, !trans_b),
                 fp8_options(accumulate, gemm_->sm_margin()));
}

// c as cuBLASLt's C where it has d's layout; else the copy, then the GEMM.
void CudaBackend::gemm_fp8_add(Mat d, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                               bool trans_b, Mat c) {
  if (c.rows != d.rows || c.cols != d.cols || c.dtype != d.dtype || c.ld != d.ld) {
    Backend::gemm_fp8_add(d, a, trans_a, b, trans_b, c);
    return;
  }
  cuda::Fp8GemmOptions o = fp8_options(/*accumulate=*/true, gemm_->sm_margin());
  o.addend = c.data;
  fp8_gemm_->run(d, fp8_operand(a, trans_a), fp8_operand(b, !trans_b), o);
}

std::int64_t CudaBackend::side_gemm_fp8_from_fork(Mat c, const Fp8Tensor& a, bool trans_a,
                                                  const Fp8Tensor& b, bool trans_b,
                                                  bool accumulate) {
  if (!side_enabled_) {
    gemm_fp8(c, a, trans_a, b, trans_b, accumulate);
    return 0;
  }
  // The side stream already waits at the fork point (fork_side_gemms).
  side_fp8_gemm_->run(c, fp8_operand(a, trans_a), fp8_operand(b, !trans_b),
                      fp8_options(accumulate, side_gemm_->sm_margin()));
  return side_->mark();
}

}  // namespace tinyllama::cuda
