#pragma once
// The bench's two contact points with the engine's plan, kept in this one
// file:
//  * plan_for: the resolved plan a variant's choices mean, for
//    Backend::prepare (which sizes attention scratch and GEMM tuning space
//    by it) and for the cost model;
//  * cost_of: the FLOPs and bytes of one op, from prof::step_cost.
#include <string>
#include <vector>

#include "model/config.h"
#include "model/step_plan.h"
#include "prof/cost_model.h"

namespace tinyllama::bench {

// Which implementation a variant runs, in the bench's own terms. The
// defaults are the fastest level's (v2) choices.
struct ImplChoice {
  bool fused_qkv = true;  // one Q/K/V GEMM, not three on row slices
  bool fused_ffn = true;  // one gate/up GEMM and the fused silu·mul
  AttentionImpl attention = AttentionImpl::Flash;
  bool fused_optimizer = true;        // one AdamW sweep, not one call per tensor
  bool fused_norm = false;            // the residual add and RMSNorm in one kernel (v3)
  bool chunked_loss = false;          // the head and loss per chunk of rows (v3)
  bool sorted_embedding_grad = true;  // the embedding gradient through a sort, not the scan
  bool fused_rope = false;            // RoPE's rotations inside the flash kernels (rope fused)
  bool recompute_norms = false;       // the norms' outputs remade in the backward (rmsnorm_apply)
  bool swiglu_gemm = false;           // SwiGLU in the GEMMs' epilogues (swiglu gemm)
  // Kernel families pinned in the plan (flash attention's, the SwiGLU
  // GEMM's): the backend is prepared with them, so the attention scratch
  // holds the fused backward's dQ accumulator where it is pinned.
  KernelPins kernels;
  bool operator==(const ImplChoice&) const = default;
};

// The plan a variant's op runs at, resolved for `caps` at these shapes.
// Execution is a captured graph, as at v2: the cost model then counts
// AdamW per layer (what the bench's AdamW runs), and prepare() allocates
// the side-stream workspace the bench never uses.
StepPlan plan_for(const ModelConfig& cfg, BatchShape batch, const ImplChoice& impl,
                  Precision precision, const DeviceCaps& caps);

// The path of the optimizer op of layer 0. The cost model has it only where
// the layers are updated during the backward pass (fused sweeps with CUDA
// graphs, not fp16); elsewhere cost_of derives it (see op_cost.cc).
inline constexpr const char* kLayerAdamwPath = "backward/layer0/adamw";

// The cost model's op at `path` ("forward/layer0/attention") for this
// shape, variant and precision. Throws RuntimeFailure when the cost model
// has no such op.
prof::OpCost cost_of(const ModelConfig& cfg, BatchShape batch, const ImplChoice& impl,
                     Precision precision, const std::string& path);

// Every op path of one step at this variant and precision, for the tests
// that keep the registry and the cost model in step.
std::vector<prof::OpCost> all_costs(const ModelConfig& cfg, BatchShape batch,
                                    const ImplChoice& impl, Precision precision);

}  // namespace tinyllama::bench
