#pragma once
// The CUDA backend's workspaces for a resolved plan, sized in one place:
// the plan lists them (cuda_workspaces(), which train's plan_for_run calls,
// so the memory check and the reported peak count them) and
// CudaBackend::prepare() allocates exactly these.
#include <cstdint>
#include <vector>

#include "model/step_plan.h"

namespace tinyllama::cuda {

struct CudaWorkspaceSizes {
  std::int64_t gemm = 0;          // cuBLASLt workspace of the main stream
  std::int64_t side_gemm = 0;     // of the weight-gradient branch (parallel branches only)
  std::int64_t gemm_tune = 0;     // GEMM autotuning of beta != 0 problems (autotune on)
  std::int64_t rms_partials = 0;  // RMSNorm backward's per-block weight-gradient sums
  // materialised: repeated K/V and dS; flash: D = rowsum(dO*O); cudnn: its workspace
  std::int64_t attention = 0;
  // embedding_grad sorted: the sort's keys and positions, cub's storage,
  // the per-chunk partial sums (ops/embedding/cuda_embedding.h, EmbeddingGradScratch)
  std::int64_t embedding_grad = 0;
  // rope fused: the flash backward's (cos, sin) table, [seq, head_dim/2] pairs
  std::int64_t rope_table = 0;

  std::vector<Workspace> list() const;
};

// gemm_autotune: whether the GEMM runners autotune (TINYLLAMA_GEMM_AUTOTUNE).
CudaWorkspaceSizes workspace_sizes(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan,
                                   bool gemm_autotune);

}  // namespace tinyllama::cuda
