#pragma once
// The CPU reference ops, one family per file (cpu_gemm.cc, cpu_rope.cc, ...).
// Each entry point validates shapes, dispatches on the dtype (float32 or
// float64) and runs a plain templated loop nest. CpuBackend forwards to these;
// the semantics are those documented in model/backend.h.
#include <cstdint>
#include <string>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cpu {

// cpu_convert.cc: any of F32, F64, BF16, F16 to any of them.
void convert(Mat dst, Mat src);

// cpu_gemm.cc
void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, double alpha, double beta);

// cpu_elementwise.cc
void add(Mat out, Mat a, Mat b);
void mul(Mat out, Mat a, Mat b);
void silu_forward(Mat out, Mat x);
void silu_backward(Mat dx, Mat dout, Mat x);
void swiglu_forward(Mat out, Mat gate, Mat up);
void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up);

// cpu_embedding.cc
void embedding_forward(Mat out, const std::int32_t* tokens, Mat table);
void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout);

// cpu_rmsnorm.cc
void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps);
// out = x * rstd * weight with a saved rstd: what rmsnorm_forward wrote.
void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd);
// With dresidual (NormImpl::Fused): dx = dresidual + the norm's input
// gradient, summed in double before the one rounding; dx may alias it.
void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                      Mat dresidual = Mat());

// cpu_rope.cc: direction +1 rotates forward, -1 applies the inverse.
void rope(Mat x, int seq, int head_dim, double theta, int direction);

// cpu_attention.cc. check_attention_shapes: q, k, v, lse (and probs when
// not empty) fit the shape; shared with the BLAS attention.
void check_attention_shapes(const std::string& op, const AttentionShape& s, Mat q, Mat k, Mat v,
                            Mat lse, Mat probs);
void attention_forward(Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v, const AttentionShape& s);
void attention_backward(Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat lse, Mat probs,
                        const AttentionShape& s);

// cpu_decode.cc, for incremental decoding: RoPE with row r at position
// first_position + r; attention of q's rows (positions first_position + t)
// over the cache's rows 0..first_position + t, the cache holding exactly
// first_position + q.rows rows.
void rope_at(Mat x, std::int64_t first_position, int head_dim, double theta);
void cached_attention(Mat out, Mat q, Mat k_cache, Mat v_cache, std::int64_t first_position,
                      int heads, int kv_heads, int head_dim);

// cpu_cross_entropy.cc
void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets);
void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets, double scale);

// cpu_adamw.cc
// clip: gradient clipping's coefficient, multiplied into the unscaled gradient.
void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp, double clip = 1.0);
void flag_nonfinite(Mat x, std::int32_t* flag);

// cpu_grad_norm.cc
void sum_squares(Mat x, double* acc);
void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm);

}  // namespace tinyllama::cpu
