// CudnnSdpa: the forward and backward plans of one layout, the workspace
// they share, and their execution. See cudnn_sdpa.h for the contract.
#include "ops/attention/cudnn/cudnn_sdpa.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/errors.h"
#include "device/cuda_check.h"
#include "ops/attention/cudnn/cudnn_handle.h"
#include "ops/attention/cudnn/execution_plan.h"
#include "ops/attention/cudnn/graph_builders.h"
#include "ops/attention/cudnn/sdpa_checks.h"
#include "ops/attention/cudnn/sdpa_graphs.h"

namespace tinyllama::cuda {

using namespace cudnn;  // NOLINT: this file is the cudnn namespace's user

std::string cudnn_build_note() {
  return "";
}

namespace {

// Regions of the workspace start on 256-byte boundaries (what cudaMalloc
// gives), so the fp32 scratch is aligned however the plan's own part ends.
constexpr std::int64_t kRegionAlign = 256;

std::int64_t align_up(std::int64_t n) {
  return (n + kRegionAlign - 1) / kRegionAlign * kRegionAlign;
}

}  // namespace

struct CudnnSdpa::Plans {
  SdpaLayout layout;
  SdpaDims dims;
  DeviceHandle handle;
  // The graphs own the descriptors the plans refer to: kept with them.
  std::unique_ptr<GraphBuilder> forward_graph;
  std::unique_ptr<GraphBuilder> backward_graph;
  ExecutionPlan forward;
  ExecutionPlan backward;
  // By-value scalars: cuDNN reads them through these host addresses at each
  // execution (and bakes them into a captured graph's kernel parameters).
  float scale = 1.0f;
  float mask_value = 0.0f;
  float one = 1.0f;
  // The backward's workspace: [plan scratch | softmax_sum | dQ accumulator].
  std::int64_t softmax_sum_offset = 0;
  std::int64_t dq_accum_offset = 0;
  std::int64_t workspace_bytes = 0;
  // cuDNN before 9.6 expected the dQ accumulator zeroed by the caller (the
  // frontend memset it then); later releases initialise it themselves.
  bool zero_dq_accum = false;

  void run(const ExecutionPlan& plan, const std::vector<std::int64_t>& uids,
           const std::vector<void*>& pointers, void* workspace, cudaStream_t stream,
           const char* what) const {
    require(current_device() == handle.device, what,
            "called on device " + std::to_string(current_device()) + ", the plans are for device " +
                std::to_string(handle.device));
    const std::lock_guard<std::mutex> lock(*handle.execute_mutex);
    check(cudnnSetStream(handle.handle, stream), "cudnnSetStream");
    execute(handle.handle, plan, uids, pointers, workspace, what);
  }

  static void require(bool ok, const char* op, const std::string& why) {
    if (!ok) throw RuntimeFailure(std::string(op) + ": " + why);
  }
};

CudnnSdpa::CudnnSdpa(const SdpaLayout& layout) : plans_(std::make_unique<Plans>()) {
  const std::string problem = layout_problem(layout);
  if (!problem.empty()) throw RuntimeFailure(problem);
  Plans& p = *plans_;
  p.layout = layout;
  p.dims = dims_of(layout);
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(layout.shape.head_dim)));
  // cuDNN 9.10+ masks with -inf; older releases wanted the lowest finite
  // float instead (the frontend's choice too).
  p.mask_value = cudnnGetVersion() >= 91000 ? -std::numeric_limits<float>::infinity()
                                            : std::numeric_limits<float>::lowest();
  p.zero_dq_accum = cudnnGetVersion() < 90600;
  try {
    p.handle = handle_for_current_device();
    p.forward_graph = std::make_unique<GraphBuilder>();
    build_forward_graph(*p.forward_graph, p.dims);
    p.forward =
        build_plan(p.handle.handle, p.forward_graph->finalize(p.handle.handle), "SDPA forward");
    p.backward_graph = std::make_unique<GraphBuilder>();
    build_backward_graph(*p.backward_graph, p.dims);
    p.backward =
        build_plan(p.handle.handle, p.backward_graph->finalize(p.handle.handle), "SDPA backward");
  } catch (const RuntimeFailure& e) {
    throw RuntimeFailure("cuDNN SDPA (" + layout_name(layout) + "): " + e.what());
  }
  p.softmax_sum_offset = align_up(p.backward.workspace_bytes);
  p.dq_accum_offset = p.softmax_sum_offset + align_up(p.dims.softmax_sum_bytes());
  const std::int64_t backward_bytes = p.dq_accum_offset + align_up(p.dims.dq_accum_bytes());
  p.workspace_bytes = std::max(align_up(p.forward.workspace_bytes), backward_bytes);

  if (std::getenv("TINYLLAMA_CUDNN_VERBOSE") != nullptr) {
    std::fprintf(stderr,
                 "cudnn sdpa %s: cuDNN %s, forward engine %lld (%.2f s, %lld B), backward engine "
                 "%lld (%.2f s, %lld B), workspace %lld B\n",
                 layout_name(layout).c_str(), runtime_version_string().c_str(),
                 static_cast<long long>(p.forward.engine_index), p.forward.build_seconds,
                 static_cast<long long>(p.forward.workspace_bytes),
                 static_cast<long long>(p.backward.engine_index), p.backward.build_seconds,
                 static_cast<long long>(p.backward.workspace_bytes),
                 static_cast<long long>(p.workspace_bytes));
  }
}

CudnnSdpa::~CudnnSdpa() = default;

const SdpaLayout& CudnnSdpa::layout() const {
  return plans_->layout;
}

std::int64_t CudnnSdpa::workspace_bytes() const {
  return plans_->workspace_bytes;
}

std::int64_t CudnnSdpa::forward_workspace_bytes() const {
  return align_up(plans_->forward.workspace_bytes);
}

void CudnnSdpa::forward(Mat out, Mat lse, Mat q, Mat k, Mat v, void* workspace,
                        cudaStream_t stream) const {
  const Plans& p = *plans_;
  const SdpaDims& d = p.dims;
  const DType t = p.layout.dtype;
  const char* op = "cudnn sdpa forward";
  const std::int64_t tokens = d.batch * d.seq;
  require_mat(op, "q", q, tokens, d.heads * d.head_dim, d.ld_qkv, t);
  require_mat(op, "k", k, tokens, d.kv_heads * d.head_dim, d.ld_qkv, t);
  require_mat(op, "v", v, tokens, d.kv_heads * d.head_dim, d.ld_qkv, t);
  require_mat(op, "out", out, tokens, d.heads * d.head_dim, d.ld_out, t);
  require_mat(op, "lse", lse, d.batch * d.heads, d.seq, d.seq, DType::F32);
  Plans::require(p.forward.workspace_bytes == 0 || workspace != nullptr, op,
                 "needs a workspace of workspace_bytes()");
  p.run(p.forward, {kUidQ, kUidK, kUidV, kUidO, kUidStats, kUidScale, kUidMaskValue},
        {q.data, k.data, v.data, out.data, lse.data, const_cast<float*>(&p.scale),
         const_cast<float*>(&p.mask_value)},
        workspace, stream, op);
}

void CudnnSdpa::backward(Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat out, Mat lse,
                         void* workspace, cudaStream_t stream) const {
  const Plans& p = *plans_;
  const SdpaDims& d = p.dims;
  const DType t = p.layout.dtype;
  const char* op = "cudnn sdpa backward";
  const std::int64_t tokens = d.batch * d.seq;
  const std::int64_t qw = d.heads * d.head_dim;
  const std::int64_t kw = d.kv_heads * d.head_dim;
  require_mat(op, "q", q, tokens, qw, d.ld_qkv, t);
  require_mat(op, "k", k, tokens, kw, d.ld_qkv, t);
  require_mat(op, "v", v, tokens, kw, d.ld_qkv, t);
  require_mat(op, "dq", dq, tokens, qw, d.ld_qkv, t);
  require_mat(op, "dk", dk, tokens, kw, d.ld_qkv, t);
  require_mat(op, "dv", dv, tokens, kw, d.ld_qkv, t);
  require_mat(op, "out", out, tokens, qw, d.ld_out, t);
  require_mat(op, "dout", dout, tokens, qw, d.ld_out, t);
  require_mat(op, "lse", lse, d.batch * d.heads, d.seq, d.seq, DType::F32);
  Plans::require(workspace != nullptr, op, "needs a workspace of workspace_bytes()");
  char* ws = static_cast<char*>(workspace);
  void* softmax_sum = ws + p.softmax_sum_offset;
  void* dq_accum = ws + p.dq_accum_offset;
  if (p.zero_dq_accum) {
    // Stream-ordered, so it stays inside a captured graph.
    CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, static_cast<std::size_t>(d.dq_accum_bytes()), stream));
  }
  p.run(p.backward,
        {kUidQ, kUidK, kUidV, kUidO, kUidDO, kUidStats, kUidDQ, kUidDK, kUidDV, kUidScale,
         kUidMaskValue, kUidOne, kUidSoftmaxSum, kUidDqAccum},
        {q.data, k.data, v.data, out.data, dout.data, lse.data, dq.data, dk.data, dv.data,
         const_cast<float*>(&p.scale), const_cast<float*>(&p.mask_value),
         const_cast<float*>(&p.one), softmax_sum, dq_accum},
        workspace, stream, op);
}

}  // namespace tinyllama::cuda
