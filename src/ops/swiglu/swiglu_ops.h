#pragma once
// The SwiGLU pieces, and the GEMMs with SwiGLU in their epilogues.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include "core/mat.h"
#include "ops/linear/fp8_tensor.h"

namespace tinyllama {

class SwigluOps {
 public:
  virtual ~SwigluOps() = default;

  virtual void silu_forward(Mat out, Mat x) = 0;
  virtual void silu_backward(Mat dx, Mat dout, Mat x) = 0;
  // Fused: out = silu(gate) * up.
  virtual void swiglu_forward(Mat out, Mat gate, Mat up) = 0;
  virtual void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) = 0;
  // The fused SwiGLU whose result an FP8 GEMM reads (issue 45,
  // Fp8Linears::swiglu_casts): q (hidden's shape) gets the codes of the
  // values swiglu_forward stores in hidden, scaled as quantize_fp8(hidden,
  // q, from) scales them. hidden holds those values afterwards when
  // keep_hidden; otherwise it is scratch the op may leave as it was. The
  // default (StepOps) is the two ops; a backend that knows the scale before
  // the pass (Kept, History) may write the codes from the SwiGLU kernel
  // itself, without the bf16 tensor's round trip.
  virtual void swiglu_forward_fp8(Mat hidden, Mat gate, Mat up, const Fp8Tensor& q,
                                  Fp8ScaleFrom from, bool keep_hidden) = 0;
  // swiglu_backward into d_gate_up's halves ([rows, 2F]: the gate's
  // gradient in columns [0, F), the up's in [F, 2F)), then
  // quantize_fp8(d_gate_up, q, from); d_gate_up is scratch unless keep_grads.
  virtual void swiglu_backward_fp8(Mat d_gate_up, Mat dout, Mat gate, Mat up, const Fp8Tensor& q,
                                   Fp8ScaleFrom from, bool keep_grads) = 0;
  // SwigluImpl::Gemm, forward: gate_up [N, 2F] = x w_gu^T (gate in columns
  // [0, F), up in [F, 2F)), then hidden [N, F] = silu(gate) * up. The
  // default (StepOps) is those two ops; a backend with one kernel for both overrides.
  virtual void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu) = 0;
  // Backward: d_hidden = d_out w_down (w_down [D, F]), then swiglu_backward
  // into d_gate_up's halves from gate_up's. The default stores d_hidden in
  // the given buffer; a fused override need not touch it.
  virtual void gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                                    Mat gate_up) = 0;
};

}  // namespace tinyllama
