#pragma once
// The op cases of the kernel bench, one op family per file (ops_*.cc);
// op_registry.cc names them and their variants.
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

enum class Pass { Forward, Backward };

// ops_gemm.cc: the linear layers of one block and the tied LM head. The
// fused form is one GEMM; the split form runs one GEMM per part (q, k, v or
// gate, up) on row slices of the same weight, as unfused levels do.
enum class Linear { Qkv, OutProj, GateUp, Down, LmHead };
enum class GemmPass { Forward, InputGrad, WeightGrad };
std::unique_ptr<OpCase> make_gemm(BenchContext& ctx, Linear linear, GemmPass pass, bool split);

// ops_attention.cc: causal GQA attention, materialised (probs kept), flash
// or cuDNN's SDPA.
// Which of flash attention's forward kernel families a case pins (CUDA
// only; the others follow the backend's own choice): side by side in the
// bench while one has not replaced the other.
enum class FlashPin {
  None,
  Mma,
  Wgmma1x64,
  Wgmma1x128,
  Wgmma2x64,
  Wgmma2x128,
  Paired2x64,
  Paired2x128,
  Overlap1x64,
  Overlap2x64,
  Overlap2x128,
  Specialized64,
  Specialized128,
  PingPong64,
  PingPong128,
  BackwardMma,
  BackwardWgmma,
  BackwardSpecialized,
  // dK, dV and dQ in one kernel (FlashBackwardKernel::Fused).
  BackwardFused,
  // The default backward kernels with D = rowsum(dO * O) in a kernel of its
  // own (FlashDelta::Separate) instead of the dQ kernel's prologue.
  BackwardSeparateDelta,
  // The dK/dV and dQ kernels' blocks in one grid (FlashBackwardKernel::
  // OneLaunch).
  BackwardOneLaunch
};
// rope: attention_rope_forward (q and k rotated as the kernels load them,
// the rotated q, k and v's copy written out) or attention_rope_backward
// (RoPE's inverse rotation of dq and dk inside the attention backward).
// The pin is carried by the plan the backend is prepared with
// (kernel_pins(pin) in the variant's ImplChoice); make_attention takes it to
// skip, with the reason, a pinned family that cannot run here rather than
// time the kernel that would run in its place.
std::unique_ptr<OpCase> make_attention(BenchContext& ctx, Pass pass, AttentionImpl impl,
                                       FlashPin pin = FlashPin::None, bool rope = false);
KernelPins kernel_pins(FlashPin pin);

// The norms' and the chunked loss's kernels run as the prepared plan says:
// a variant pins what the current kernels replaced through its
// ImplChoice's KernelPins (NormWeightSum::SecondKernel, NormLongRows::
// OneWarp, LossRows::Staged / Streamed), op_registry.cc.

// ops_norm_rope.cc
std::unique_ptr<OpCase> make_rmsnorm(BenchContext& ctx, Pass pass);
// rmsnorm_apply: a norm's output remade from its saved rstd.
std::unique_ptr<OpCase> make_rmsnorm_apply(BenchContext& ctx);
std::unique_ptr<OpCase> make_rope(BenchContext& ctx, Pass pass);

// ops_residual_norm.cc: NormImpl::Fused's residual add + RMSNorm.
std::unique_ptr<OpCase> make_residual_norm(BenchContext& ctx, Pass pass);

// ops_elementwise.cc: SwiGLU fused or as silu and mul; the residual add.
std::unique_ptr<OpCase> make_swiglu(BenchContext& ctx, Pass pass, bool fused);
// The GEMM beside the SwiGLU and the SwiGLU (forward: the gate/up GEMM;
// backward: the down projection's data gradient): in one kernel
// (Backend::gemm_swiglu_*, in_epilogue) or as the GEMM then the fused
// kernel (the composition the other levels run). The epilogue kernel's
// schedule is the prepared plan's (a variant pins one through its
// ImplChoice's KernelPins).
std::unique_ptr<OpCase> make_swiglu_gemm(BenchContext& ctx, Pass pass, bool in_epilogue);
std::unique_ptr<OpCase> make_residual_add(BenchContext& ctx);

// ops_loss_embedding.cc. The embedding's tokens uniform over the
// vocabulary, or skewed like text's (Zipf), which is what separates the
// gradient's scan and sorted kernels.
std::unique_ptr<OpCase> make_embedding(BenchContext& ctx, Pass pass, bool zipf_tokens = false);
std::unique_ptr<OpCase> make_cross_entropy(BenchContext& ctx, Pass pass);
// LossImpl::Chunked's loss and dlogits in one kernel.
std::unique_ptr<OpCase> make_cross_entropy_fused(BenchContext& ctx);

// ops_adamw.cc: AdamW over layer 0's parameters, per tensor or one sweep.
std::unique_ptr<OpCase> make_adamw(BenchContext& ctx, bool fused);

}  // namespace tinyllama::bench
