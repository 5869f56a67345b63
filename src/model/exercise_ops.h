#pragma once
// Ops that no training step runs: the debugging exercise's slow-on-purpose
// faults (model/faults.h) and the kernel bench's attention.fwd flash+rope.
// Kept out of the op contract (model/step_ops.h) so that a backend owes
// none of them: Backend::exercise_ops() is null unless the backend
// implements all three, and a caller throws RuntimeFailure naming what is
// missing instead.
#include "core/mat.h"
#include "model/step_ops.h"

namespace tinyllama {

class ExerciseOps {
 public:
  virtual ~ExerciseOps() = default;

  // The exercise fault naive-swiglu (model/faults.h): out = x · wᵀ like
  // gemm(out, x, false, w, true, 1, 0), but slow on purpose -- on CUDA one
  // thread per output element reducing over x's columns, no tiles, no
  // tensor cores; on the CPU the reference loops instead of BLAS. A backend
  // without it has no exercise_ops(), and its caller throws RuntimeFailure.
  virtual void naive_linear(Mat out, Mat x, Mat w) = 0;
  // The exercise fault noncontiguous-kv (model/faults.h): out and lse as
  // attention_forward(Flash, ...) leaves them, so the flash backward follows
  // unchanged, but slow on purpose -- on CUDA each lane of a warp reads its
  // own K/V rows (uncoalesced), nothing tiled; on the CPU the reference
  // loops instead of BLAS. A backend without it has no exercise_ops(), and
  // its caller throws RuntimeFailure.
  virtual void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                            const AttentionShape& shape) = 0;
  // RoPE's forward rotation inside attention: q, k, v as the QKV GEMM wrote
  // them (before RoPE) in; q_rot, k_rot = q, k rotated (rope_forward,
  // rope_theta, shape.head_dim) and v_copy = v out, where a backward would
  // read them; and attention_forward over those, as one op. The outputs
  // must not overlap the inputs. compose_attention_rope_forward below is
  // that composition (the CPU reference's implementation); the CUDA
  // backend's flash kernels rotate their Q and K tiles as they load them.
  // The model does not call it: it measured slower than rope_forward then
  // attention (RopeImpl); the kernel bench keeps it as attention.fwd
  // flash+rope.
  virtual void attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k,
                                      Mat v, Mat q_rot, Mat k_rot, Mat v_copy,
                                      const AttentionShape& shape, double rope_theta) = 0;
};

// attention_rope_forward as ops's convert, rope_forward and attention_forward:
// v copied, q and k copied and rotated, then attention over the copies.
void compose_attention_rope_forward(StepOps& ops, AttentionImpl impl, Mat out, Mat lse, Mat probs,
                                    Mat q, Mat k, Mat v, Mat q_rot, Mat k_rot, Mat v_copy,
                                    const AttentionShape& shape, double rope_theta);

}  // namespace tinyllama
