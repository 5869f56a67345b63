// See cuda_gemm_timing.h.
#include "ops/linear/cuda_gemm_timing.h"

#include <algorithm>
#include <array>

#include "device/cuda_check.h"

namespace tinyllama::cuda {
namespace {

constexpr int kGemmTimings = 5;  // the median counts
constexpr int kGraphBatch = 10;  // launches per graph replay

// The median of the timings between marks 2r and 2r + 1.
float median_timing(EventTimer& timer) {
  std::array<float, kGemmTimings> ms{};
  for (int r = 0; r < kGemmTimings; ++r) {
    ms[static_cast<std::size_t>(r)] = static_cast<float>(timer.elapsed_ms(2 * r, 2 * r + 1));
  }
  std::sort(ms.begin(), ms.end());
  return ms[kGemmTimings / 2];
}

}  // namespace

int gemm_timing_marks() {
  return 2 * kGemmTimings;
}

float time_launches_one_by_one(const std::function<bool()>& launch, cudaStream_t stream,
                               EventTimer& timer) {
  bool ok = true;
  for (int r = 0; r < kGemmTimings && ok; ++r) {
    timer.record(2 * r);
    ok = launch();
    timer.record(2 * r + 1);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!ok) {
    cudaGetLastError();  // a refused launch leaves no sticky error: clear it
    return -1.f;
  }
  return median_timing(timer);
}

float time_launches_in_graph(const std::function<bool()>& launch, cudaStream_t stream,
                             EventTimer& timer) {
  // Thread-local capture: other threads' CUDA calls are not ours to refuse.
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return -1.f;
  }
  bool ok = true;
  for (int i = 0; i < kGraphBatch && ok; ++i) ok = launch();
  cudaGraph_t graph = nullptr;
  ok = cudaStreamEndCapture(stream, &graph) == cudaSuccess && ok;
  cudaGraphExec_t exec = nullptr;
  ok = ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!ok) {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    cudaGetLastError();  // a refused capture leaves no sticky error: clear it
    return -1.f;
  }
  struct ExecGuard {
    cudaGraphExec_t e;
    ~ExecGuard() { cudaGraphExecDestroy(e); }
  } guard{exec};
  CUDA_CHECK(cudaGraphLaunch(exec, stream));  // untimed: uploads the graph
  for (int r = 0; r < kGemmTimings; ++r) {
    timer.record(2 * r);
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    timer.record(2 * r + 1);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return median_timing(timer) / kGraphBatch;
}

}  // namespace tinyllama::cuda
