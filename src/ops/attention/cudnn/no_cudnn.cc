// cudnn_sdpa.h for a build without cuDNN: every layout is unsupported, with
// the reason, and nothing here touches cuDNN.
#include "core/errors.h"
#include "ops/attention/cudnn/cudnn_sdpa.h"

namespace tinyllama::cuda {

namespace {

constexpr const char* kNoCudnn = "this build has no cuDNN";

}  // namespace

std::string cudnn_build_note() {
  return kNoCudnn;
}

std::string cudnn_sdpa_unsupported(const SdpaLayout&) {
  return kNoCudnn;
}

// The plans are never built: the constructor refuses, so no other member
// can be reached on an object.
struct CudnnSdpa::Plans {
  SdpaLayout layout;
};

CudnnSdpa::CudnnSdpa(const SdpaLayout&) {
  throw RuntimeFailure(std::string("cuDNN SDPA: ") + kNoCudnn);
}

CudnnSdpa::~CudnnSdpa() = default;

const SdpaLayout& CudnnSdpa::layout() const {
  return plans_->layout;
}

std::int64_t CudnnSdpa::workspace_bytes() const {
  return 0;
}

std::int64_t CudnnSdpa::forward_workspace_bytes() const {
  return 0;
}

void CudnnSdpa::forward(Mat, Mat, Mat, Mat, Mat, void*, cudaStream_t) const {
  throw RuntimeFailure(std::string("cuDNN SDPA: ") + kNoCudnn);
}

void CudnnSdpa::backward(Mat, Mat, Mat, Mat, Mat, Mat, Mat, Mat, Mat, void*, cudaStream_t) const {
  throw RuntimeFailure(std::string("cuDNN SDPA: ") + kNoCudnn);
}

const CudnnSdpa& cudnn_sdpa_for(const SdpaLayout&) {
  throw RuntimeFailure(std::string("cuDNN SDPA: ") + kNoCudnn);
}

}  // namespace tinyllama::cuda
