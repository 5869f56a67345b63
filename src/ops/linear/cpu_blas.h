#pragma once
// The CPU backend's fast fp32 path: GEMMs through OpenBLAS (cpu_blas.cc), or
// nothing in a build without it (cpu_no_blas.cc), where the fast backend keeps
// the reference loops. fp32 only: BLAS sums in fp32, in its own blocked
// order, like cuBLAS; the fp64 gradient checks and every reference
// comparison stay on the exact loops of cpu_gemm.cc.
#include <string>

#include "core/mat.h"
#include "model/backend.h"  // AttentionShape

namespace tinyllama::cpu {

// Whether this build has a BLAS for blas_gemm.
bool blas_available();

// What the fast GEMMs run on, for the device line: e.g. "OpenBLAS 0.3.21,
// Haswell kernels", or "no BLAS in this build: reference loops".
std::string blas_description();

// Call first thing in main: when OpenBLAS chose a generic fallback for a
// CPU that runs better kernels (ops/linear/cpu_blas_kernels.h), re-executes the
// process (/proc/self/exe, the same argv) with OPENBLAS_CORETYPE naming
// them. Returns when nothing needs doing -- OPENBLAS_CORETYPE already set
// (also by the re-execution itself), a good choice, no BLAS -- or when the
// re-execution failed (the run goes on with the slower kernels).
void use_best_blas_kernels(char** argv);

// c = alpha * op(a) * op(b) + beta * c, every Mat float32 with any row
// stride (a column or row block of a wider buffer). beta == 0 never reads
// c. Checks shapes like cpu::gemm; throws std::logic_error without a BLAS.
// OpenBLAS itself runs single-threaded (set once, for the process);
// blas_gemm splits c over worker_count() threads, blas_gemm_serial runs on
// the calling thread (for callers that are threads of a parallel_for).
void blas_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta);
void blas_gemm_serial(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta);

// Causal GQA attention, float32, with the semantics of cpu::attention_forward
// and cpu::attention_backward (probs may be empty: P is then recomputed from
// lse), its matrix products through blas_gemm (cpu_attention_blas.cc).
void attention_forward_blas(Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                            const AttentionShape& s);
void attention_backward_blas(Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat lse,
                             Mat probs, const AttentionShape& s);

}  // namespace tinyllama::cpu
