#pragma once
// The SwiGLU pieces, and the GEMMs with SwiGLU in their epilogues.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include "core/mat.h"

namespace tinyllama {

class SwigluOps {
 public:
  virtual ~SwigluOps() = default;

  virtual void silu_forward(Mat out, Mat x) = 0;
  virtual void silu_backward(Mat dx, Mat dout, Mat x) = 0;
  // Fused: out = silu(gate) * up.
  virtual void swiglu_forward(Mat out, Mat gate, Mat up) = 0;
  virtual void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) = 0;
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
