#include "cuda/cuda_workspaces.h"

#include <algorithm>

#include "device/cuda_env.h"
#include "model/fp8_plan.h"
#include "ops/attention/cuda_attention.h"
#include "ops/attention/cuda_attention_choice.h"
#include "ops/attention/flash/flash_attention.h"
#include "ops/elementwise/cuda_elementwise.h"
#include "ops/embedding/cuda_embedding.h"
#include "ops/linear/gemm_workspace.h"
#include "ops/norm/cuda_rmsnorm.h"
#include "ops/rope/cuda_rope.h"

namespace tinyllama::cuda {
namespace {

// Smallest GEMM autotune scratch: covers small GEMMs outside the model (tests).
constexpr std::int64_t kMinGemmTuneScratchBytes = 1 << 20;

// TINYLLAMA_GEMM_WORKSPACE_MIB: both streams' cuBLASLt workspace in MiB,
// the knob that measures what a size costs (with TINYLLAMA_GEMM_VERBOSE=1
// the runners print what their chosen algorithms need); -1 when unset.
std::int64_t gemm_workspace_override() {
  const long mib = env_whole_number("TINYLLAMA_GEMM_WORKSPACE_MIB", 1024);
  return mib < 0 ? -1 : static_cast<std::int64_t>(mib) << 20;
}

// Elements of the largest output of the step's weight-gradient GEMMs: the
// linears' ([out, in] each) and the LM head's.
std::int64_t largest_weight_gradient(const ModelConfig& cfg, BatchShape shape) {
  std::int64_t most = cfg.padded_vocab() * cfg.hidden_dim;
  for (int k = 0; k < kLinearKinds; ++k) {
    const LinearShape s = linear_shape(cfg, shape, static_cast<LinearKind>(k));
    most = std::max(most, s.out * s.in);
  }
  return most;
}

}  // namespace

CudaWorkspaceSizes workspace_sizes(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan,
                                   bool gemm_autotune) {
  CudaWorkspaceSizes w;
  // The weight gradients run on the side stream with parallel branches, on
  // the main one without; two GEMMs in flight must not share a workspace.
  const bool fp32 = plan.precision.compute == DType::F32;
  const std::int64_t forward = forward_gemm_workspace_bytes(fp32);
  const std::int64_t weight_gradient =
      weight_gradient_gemm_workspace_bytes(largest_weight_gradient(cfg, shape), fp32);
  w.gemm = plan.parallel_branches ? forward : std::max(forward, weight_gradient);
  if (plan.parallel_branches) w.side_gemm = weight_gradient;
  const std::int64_t override_bytes = gemm_workspace_override();
  if (override_bytes >= 0) {
    w.gemm = override_bytes;
    if (plan.parallel_branches) w.side_gemm = override_bytes;
  }
  // Autotuning times accumulating (beta != 0) GEMMs into this scratch, never
  // into their real output. The model accumulates only the input gradients
  // of separate qkv / gate_up projections (tokens x hidden, fp32 at most).
  if (gemm_autotune) {
    w.gemm_tune = kMinGemmTuneScratchBytes;
    if (plan.ops.qkv_gemm == GemmGrouping::Separate ||
        plan.ops.gate_up_gemm == GemmGrouping::Separate) {
      w.gemm_tune = std::max(
          w.gemm_tune, shape.tokens() * cfg.hidden_dim * static_cast<std::int64_t>(sizeof(float)));
    }
  }
  // Two sets of partial rows where the second kernel sums them on the side
  // branch: a norm's rows are summed there while the next norm writes the
  // other set (with one set, the next norm waits for that sum).
  const bool side_sums =
      plan.parallel_branches && rmsnorm_backward_sums_in_second_kernel(
                                    shape.tokens(), cfg.hidden_dim, plan.kernels.norm_weight_sum);
  w.rms_partials = (side_sums ? 2 : 1) * static_cast<std::int64_t>(kRmsnormPartialRows) *
                       cfg.hidden_dim * static_cast<std::int64_t>(sizeof(float)) +
                   kRmsnormCounterBytes;
  const AttentionShape as = attention_shape(cfg, shape);
  switch (plan.ops.attention) {
    case AttentionImpl::Materialized:
      w.attention = AttentionScratch::bytes_for(as, plan.precision.compute);
      break;
    case AttentionImpl::Flash:
      w.attention = flash_attention_scratch_bytes(as, plan.kernels);
      break;
    case AttentionImpl::Cudnn:
      w.attention =
          cudnn_sdpa_for(model_sdpa_layout(cfg, shape, plan.precision.compute)).workspace_bytes();
      break;
    case AttentionImpl::CudnnFlash:
      // cuDNN's forward workspace in the forward, the flash scratch in the
      // backward: never at once, so one block of the larger.
      w.attention = std::max(cudnn_sdpa_for(model_sdpa_layout(cfg, shape, plan.precision.compute))
                                 .forward_workspace_bytes(),
                             flash_attention_scratch_bytes(as, plan.kernels));
      break;
    case AttentionImpl::Auto:
      throw RuntimeFailure("workspace_sizes: attention auto was not resolved");
  }
  if (plan.ops.rope == RopeImpl::Fused) w.rope_table = rope_table_bytes(shape.seq, cfg.head_dim());
  if (plan.ops.embedding_grad == EmbeddingGradImpl::Sorted) {
    w.embedding_grad =
        EmbeddingGradScratch::bytes_for(shape.tokens(), cfg.hidden_dim, cfg.vocab_size);
  }
  return w;
}

std::vector<Workspace> CudaWorkspaceSizes::list() const {
  std::vector<Workspace> out;
  auto add = [&](const char* name, std::int64_t bytes) {
    if (bytes > 0) out.push_back({name, bytes});
  };
  add("gemm", gemm);
  add("side_gemm", side_gemm);
  add("gemm_autotune", gemm_tune);
  add("rmsnorm_partials", rms_partials);
  add("attention", attention);
  add("embedding_grad", embedding_grad);
  add("rope_table", rope_table);
  return out;
}

}  // namespace tinyllama::cuda
