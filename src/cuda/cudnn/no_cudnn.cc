// cudnn_sdpa.h in a build without cuDNN: every layout is unsupported.
#include "core/errors.h"
#include "cuda/cudnn/cudnn_sdpa.h"

namespace tinyllama::cuda {
namespace {
constexpr const char* kNoCudnn = "this build has no cuDNN";
}

bool operator==(const SdpaLayout& a, const SdpaLayout& b) {
  return a.shape.batch == b.shape.batch && a.shape.seq == b.shape.seq &&
         a.shape.heads == b.shape.heads && a.shape.kv_heads == b.shape.kv_heads &&
         a.shape.head_dim == b.shape.head_dim && a.dtype == b.dtype && a.ld_qkv == b.ld_qkv &&
         a.ld_out == b.ld_out;
}

std::string cudnn_build_note() {
  return kNoCudnn;
}

std::string cudnn_sdpa_unsupported(const SdpaLayout&) {
  return kNoCudnn;
}

struct CudnnSdpa::Plans {};

CudnnSdpa::CudnnSdpa(const SdpaLayout&) {
  throw RuntimeFailure(std::string("cuDNN attention: ") + kNoCudnn);
}
CudnnSdpa::~CudnnSdpa() = default;

const SdpaLayout& CudnnSdpa::layout() const {
  throw RuntimeFailure(std::string("cuDNN attention: ") + kNoCudnn);
}
std::int64_t CudnnSdpa::workspace_bytes() const {
  return 0;
}
void CudnnSdpa::forward(Mat, Mat, Mat, Mat, Mat, void*, cudaStream_t) const {
  throw RuntimeFailure(std::string("cuDNN attention: ") + kNoCudnn);
}
void CudnnSdpa::backward(Mat, Mat, Mat, Mat, Mat, Mat, Mat, Mat, Mat, void*, cudaStream_t) const {
  throw RuntimeFailure(std::string("cuDNN attention: ") + kNoCudnn);
}

const CudnnSdpa& cudnn_sdpa_for(const SdpaLayout& layout) {
  static_cast<void>(CudnnSdpa(layout));  // throws
  throw RuntimeFailure(std::string("cuDNN attention: ") + kNoCudnn);
}

}  // namespace tinyllama::cuda
