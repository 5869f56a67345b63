#pragma once
// The op set the model's hand-written forward and backward passes call.
// The CPU backend is the obviously-correct reference; the CUDA backend
// implements the same contract with kernels. Every op takes Mat views, so a
// fused buffer can be handed out in column blocks without copies. Only the
// ops a training step runs are here: the device's services (memory, graphs,
// stream joins) are model/device_services.h, and the ops that exist for the
// debugging exercise and the kernel bench alone are model/exercise_ops.h,
// so that this class is the whole contract a new backend's kernels must meet.
// Each op family states its part beside its kernels (ops/<family>/*_ops.h);
// StepOps is their union, and the reference composition of each fused op
// whose parts belong to several families (its defaults, step_ops.cc).
//
// Conventions shared by all backends:
//  * activations are in the precision's compute dtype; parameter gradients
//    in the master dtype; statistics (rstd, lse, losses) in Precision::stats();
//  * outputs are overwritten unless the op says it accumulates;
//  * no op allocates device memory (the arena is planned before step 1).
#include <cstdint>

#include "core/mat.h"
#include "ops/attention/attention_ops.h"
#include "ops/convert/convert_ops.h"
#include "ops/elementwise/elementwise_ops.h"
#include "ops/embedding/embedding_ops.h"
#include "ops/linear/linear_ops.h"
#include "ops/loss/loss_ops.h"
#include "ops/norm/norm_ops.h"
#include "ops/optimizer/optimizer_ops.h"
#include "ops/rope/rope_ops.h"
#include "ops/swiglu/swiglu_ops.h"

namespace tinyllama {

class StepOps : public ConvertOps,
                public LinearOps,
                public ElementwiseOps,
                public EmbeddingOps,
                public NormOps,
                public RopeOps,
                public AttentionOps,
                public SwigluOps,
                public LossOps,
                public OptimizerOps {
 public:
  ~StepOps() override = default;

  // The fused ops' reference compositions (each family's header says what
  // the op is): a GEMM then add(), attention's backward then RoPE's, the
  // GEMM then SwiGLU, SwiGLU or the norm then the FP8 cast, AdamW then
  // convert(). A backend with one kernel for the whole overrides them.
  void gemm_add(Mat d, Mat a, bool trans_a, Mat b, bool trans_b, Mat c) override;
  std::int64_t side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                         float beta) override;
  std::int64_t side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                   float beta) override;
  void gemm_fp8_add(Mat d, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b,
                    Mat c) override;
  std::int64_t side_gemm_fp8_from_fork(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                                       bool trans_b, bool accumulate) override;
  void attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k,
                               Mat v, Mat out, Mat lse, Mat probs, const AttentionShape& shape,
                               double rope_theta) override;
  void rmsnorm_forward_fp8(Mat out, Mat rstd, Mat x, Mat weight, double eps, const Fp8Tensor& q,
                           Fp8ScaleFrom from, bool keep_out) override;
  void rmsnorm_apply_fp8(Mat out, Mat x, Mat weight, Mat rstd, const Fp8Tensor& q,
                         Fp8ScaleFrom from, bool keep_out) override;
  void swiglu_forward_fp8(Mat hidden, Mat gate, Mat up, const Fp8Tensor& q, Fp8ScaleFrom from,
                          bool keep_hidden) override;
  void swiglu_backward_fp8(Mat d_gate_up, Mat dout, Mat gate, Mat up, const Fp8Tensor& q,
                           Fp8ScaleFrom from, bool keep_grads) override;
  void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu) override;
  void gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                            Mat gate_up) override;
  void adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                   const AdamWHyper& hp) override;
};

}  // namespace tinyllama
