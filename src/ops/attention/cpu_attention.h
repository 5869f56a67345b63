#pragma once
// The CPU references of causal GQA attention (cpu_attention.cc; the BLAS
// form in cpu_attention_blas.cc). Each entry point validates
// shapes, dispatches on the dtype (float32 or float64) and runs a plain
// loop nest; CpuBackend forwards to it (contract: model/step_ops.h).
#include <string>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cpu {

// check_attention_shapes: q, k, v, lse (and probs when not empty) fit the
// shape; shared with the BLAS attention.
void check_attention_shapes(const std::string& op, const AttentionShape& s, Mat q, Mat k, Mat v,
                            Mat lse, Mat probs);
void attention_forward(Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v, const AttentionShape& s);
void attention_backward(Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat lse, Mat probs,
                        const AttentionShape& s);

}  // namespace tinyllama::cpu
