#pragma once
// Which linear-layer GEMMs a --amp-dtype float8 run puts on FP8 tensor
// cores (issue 45). Each of the four linears (QKV, out projection, gate/up,
// down) has three GEMMs per step -- forward, data gradient, weight gradient
// -- and each is FP8 only where its estimated time with the casts it needs
// is below the bf16 GEMM's (small GEMMs lose: the casts' launches and
// passes cost more than the faster tensor cores save). The estimate is
// fp8_gemm_estimate's; resolve_plan asks choose_fp8_linears once and the
// passes read StepPlan::fp8.
#include <array>
#include <string>

#include "model/config.h"

namespace tinyllama {

enum class LinearKind { Qkv, OutProj, GateUp, Down };
inline constexpr int kLinearKinds = 4;
enum class LinearPass { Forward, Dgrad, Wgrad };
inline constexpr int kLinearPasses = 3;

const char* linear_name(LinearKind k);       // "qkv", "out_proj", "gate_up", "down"
const char* linear_pass_name(LinearPass p);  // "forward", "dgrad", "wgrad"

// One linear layer's GEMM shapes: x [tokens, in] -> y [tokens, out].
struct LinearShape {
  std::int64_t tokens = 0, in = 0, out = 0;
};
LinearShape linear_shape(const ModelConfig& cfg, BatchShape shape, LinearKind k);

// How each FP8 tensor's scale is found (--fp8-scaling). Current: from the
// tensor's own amax, a pass over it before the cast. Delayed (Transformer
// Engine's recipe): from the largest amax of the kFp8History steps before
// (ops/linear/fp8_tensor.h), recorded by the casts themselves, so a cast is
// one pass; a value above the history's saturates to the largest code. The
// first training step, with no history yet, scales as Current does.
enum class Fp8Scaling { Current, Delayed };
const char* fp8_scaling_name(Fp8Scaling s);  // "current", "delayed"

struct Fp8Linears {
  std::array<std::array<bool, kLinearPasses>, kLinearKinds> use{};
  Fp8Scaling scaling = Fp8Scaling::Current;
  // The SwiGLU kernel writes the FP8 codes its FP8 readers take (the down
  // projection's input, forward and, where the backward recomputes it, its
  // transpose; the gate/up gradient's copies), rather than bf16 for a cast
  // to read back (SwigluOps::swiglu_forward_fp8). Delayed scaling only: the
  // scale must be known before the pass.
  bool swiglu_casts = false;
  // The norms write the FP8 codes of the QKV and gate/up projections'
  // input rather than bf16 for a cast: the forward's norm (where it is a
  // kernel of its own, GemmEpilogue::Residual) the forward GEMM's copy, the
  // backward's recomputed norm (ActivationsImpl::RecomputeNorms) the weight
  // gradient's transposed one (NormOps::rmsnorm_forward_fp8,
  // rmsnorm_apply_fp8). Delayed scaling only, set by resolve_plan.
  bool norm_casts = false;
  // The weights' FP8 casts may read the fp32 master weights, as their bf16
  // values (Fp8Tensor::rounds_to_bf16: the codes of the bf16 copy, bit for
  // bit), so a linear whose every GEMM reading its weight is FP8 (forward
  // and data gradient) keeps no bf16 copy (keeps_bf16_weight). Single
  // process only, set by resolve_plan: ZeRO-1 gathers the bf16 copies.
  bool master_weights = false;
  // The gate/up gradient exists only as its FP8 codes: the arena has no
  // bf16 buffer for it (ActivationPlan::d_gate_up has a shape, no memory).
  // Where the CUDA SwiGLU backward writes both its copies from whole tiles
  // (SwigluOps::swiglu_backward_fp8; the first step's amax in a pass of its
  // own) and both of the projection's backward GEMMs are FP8. Set by
  // resolve_plan.
  bool swiglu_grad_codes_only = false;
  // The SwiGLU output is kept for the backward only as the down
  // projection's transposed FP8 codes ([F, tokens] bytes a layer, not
  // [tokens, F] bf16): the forward's SwiGLU kernel writes them beside the
  // forward GEMM's copy, with its scale, and the arena has no bf16 buffer
  // for the output (ActivationPlan::layers' ffn_hidden has a shape, no
  // memory). Where the CUDA SwiGLU writes both copies from whole tiles, the
  // down projection's forward and weight gradient are FP8 and the output is
  // stored, not recomputed. Set by resolve_plan.
  bool swiglu_keeps_codes = false;
  // Per linear: the estimated milliseconds of its three GEMMs in bf16 and
  // as chosen (casts included), for the run header's line.
  std::array<double, kLinearKinds> bf16_ms{}, chosen_ms{};

  bool at(LinearKind k, LinearPass p) const {
    return use[static_cast<int>(k)][static_cast<int>(p)];
  }
  bool any() const;
  bool backward(LinearKind k) const { return at(k, LinearPass::Dgrad) || at(k, LinearPass::Wgrad); }
  // Whether a bf16 GEMM reads linear k's weight, so the compute copy holds it.
  bool keeps_bf16_weight(LinearKind k) const {
    return !master_weights || !at(k, LinearPass::Forward) || !at(k, LinearPass::Dgrad);
  }
  // "qkv fwd dgrad wgrad, out_proj -, ..." and the estimate.
  std::string describe() const;
};

// Estimated milliseconds on an H100/H200 (fp8_plan.cc says where the rates
// come from): a GEMM of 2*m*n*k FLOPs in bf16 or FP8, and a quantisation of
// `elems` bf16 elements writing `copies` copies, with or without its amax.
double gemm_estimate_ms(std::int64_t m, std::int64_t n, std::int64_t k, bool fp8);
// amax: with its own pass (and the scale's launch) before the cast.
double quantize_estimate_ms(std::int64_t elems, int copies, bool amax);
// The same codes written by the kernel that produces the values: the
// bytes of the copies only.
double producer_cast_estimate_ms(std::int64_t elems, int copies);

// Auto: each GEMM where the estimate is faster in FP8. All: every linear
// GEMM (the numerics checks, and measuring the estimate).
enum class Fp8Choice { Auto, All };

// The kernels that may write the FP8 codes of what they compute, so an
// operand they make costs the choice only its codes' bytes. Delayed
// scaling only: the scale must be known before the pass.
struct Fp8Producers {
  // The SwiGLU, a kernel of its own: the down projection's x (and its x^T,
  // beside an FP8 forward's copy or in the backward's recompute), the
  // gate/up projection's dy.
  bool swiglu = false;
  // The forward's norms, kernels of their own (GemmEpilogue::Residual):
  // the QKV and gate/up projections' x.
  bool forward_norms = false;
  // The backward's recomputed norms (recomputes_norms): those x^T.
  bool recomputed_norms = false;
};

// The choice for every linear of this model at this batch: all false for a
// linear with a dimension that is not a multiple of 16 (cuBLASLt's rule).
// The result's swiglu_casts is set where the SwiGLU may write codes and an
// FP8 GEMM reads them.
Fp8Linears choose_fp8_linears(const ModelConfig& cfg, BatchShape shape,
                              Fp8Choice choice = Fp8Choice::Auto,
                              Fp8Scaling scaling = Fp8Scaling::Current,
                              Fp8Producers producers = {});

}  // namespace tinyllama
