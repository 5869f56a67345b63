#pragma once
// cuDNN's fused scaled-dot-product attention as an attention implementation
// (AttentionImpl::Cudnn): causal, scale 1/sqrt(hd), GQA without repeating
// K/V, forward and backward, bf16 and fp16 (fp32 stays on our kernels).
// Built through cuDNN's backend graph API (the C++ frontend is not packaged
// here); every cuDNN call of the project lives under src/ops/attention/cudnn/.
//
// The math is the Backend contract's (src/model/backend.h): q/out rows are
// b*S + s with head h in columns [h*hd, (h+1)*hd); k/v likewise with K
// heads; query head h reads kv head h / (H/K); lse is fp32 [B*H, S]
// (ld = S), the natural-log log-sum-exp of each row of scaled, masked
// scores, as the CPU reference writes it.
//
// A build without cuDNN compiles no_cudnn.cc instead: every layout is then
// unsupported, with that reason.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cuda {

// One attention call as the model lays it out: q, k and v are column blocks
// of one [B*S, (H+2K)*hd] buffer and dq, dk, dv of another with the same
// row stride (ld_qkv); out and dout share ld_out. The execution plans are
// built for these strides.
struct SdpaLayout {
  AttentionShape shape;
  DType dtype = DType::BF16;
  std::int64_t ld_qkv = 0;
  std::int64_t ld_out = 0;
};
inline bool operator==(const SdpaLayout& a, const SdpaLayout& b) {
  return a.shape.batch == b.shape.batch && a.shape.seq == b.shape.seq &&
         a.shape.heads == b.shape.heads && a.shape.kv_heads == b.shape.kv_heads &&
         a.shape.head_dim == b.shape.head_dim && a.dtype == b.dtype && a.ld_qkv == b.ld_qkv &&
         a.ld_out == b.ld_out;
}

// "" when this build has cuDNN; otherwise one line saying so.
std::string cudnn_build_note();

// "" when cuDNN SDPA can run `layout` on the current device; otherwise why
// not, in one line (no cuDNN in this build, fp32, a head_dim or shape no
// cuDNN engine supports, cuDNN's own message). May build the plans to find
// out; never throws.
std::string cudnn_sdpa_unsupported(const SdpaLayout& layout);

// Forward and backward execution plans for one layout, built by the
// constructor (RuntimeFailure with cuDNN's reason when it cannot).
class CudnnSdpa {
 public:
  explicit CudnnSdpa(const SdpaLayout& layout);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  const SdpaLayout& layout() const;
  // Device workspace either pass needs (they share one); 0 allowed. Planned
  // with the backend's other workspaces: nothing is allocated in a step.
  std::int64_t workspace_bytes() const;
  // The forward's alone (attention cudnn+flash runs no cuDNN backward): the
  // backward's is most of workspace_bytes(), its fp32 dQ accumulator.
  std::int64_t forward_workspace_bytes() const;

  // Capturable in a CUDA graph: no allocation, no host synchronisation.
  // The Mats must match the layout (shapes, dtype, strides): RuntimeFailure
  // otherwise.
  void forward(Mat out, Mat lse, Mat q, Mat k, Mat v, void* workspace, cudaStream_t stream) const;
  void backward(Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat out, Mat lse,
                void* workspace, cudaStream_t stream) const;

 private:
  struct Plans;
  std::unique_ptr<Plans> plans_;
};

// The process's CudnnSdpa for a layout, built on first use and kept (plan
// building can take a while): the workspace query at plan resolution, the
// start-up timing of attention=auto and the backend share one.
const CudnnSdpa& cudnn_sdpa_for(const SdpaLayout& layout);

}  // namespace tinyllama::cuda
