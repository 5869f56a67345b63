// attention_rope_forward's composition from the step ops: the CPU
// reference's implementation, and the CUDA backend's outside flash.
#include "model/exercise_ops.h"

namespace tinyllama {

void compose_attention_rope_forward(StepOps& ops, AttentionImpl impl, Mat out, Mat lse, Mat probs,
                                    Mat q, Mat k, Mat v, Mat q_rot, Mat k_rot, Mat v_copy,
                                    const AttentionShape& shape, double rope_theta) {
  ops.convert(q_rot, q);
  ops.convert(k_rot, k);
  ops.convert(v_copy, v);
  ops.rope_forward(q_rot, shape.seq, shape.head_dim, rope_theta);
  ops.rope_forward(k_rot, shape.seq, shape.head_dim, rope_theta);
  ops.attention_forward(impl, out, lse, probs, q_rot, k_rot, v_copy, shape);
}

}  // namespace tinyllama
