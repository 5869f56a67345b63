#include "device/cuda_graph.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/errors.h"
#include "device/cuda_check.h"

namespace tinyllama::cuda {
namespace {

// Staging slots start on this boundary, which keeps every DMA source aligned.
constexpr std::size_t kSlotAlign = 256;
// Room for several steps of a large batch's tokens and targets, so that
// wrapping around (and the wait it may need) is rare.
constexpr std::size_t kMinStagingBytes = 4u << 20;

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

[[noreturn]] void fail(const std::string& what, cudaError_t err) {
  cudaGetLastError();  // leave no error behind for the eager steps that follow
  throw RuntimeFailure(what + ": " + cudaGetErrorString(err));
}

}  // namespace

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

GraphStats count_nodes(cudaGraph_t graph) {
  std::size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  GraphStats stats;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    // The runtime cannot name every node the driver can hold (NCCL's
    // copy-engine collectives capture batched memory operations): such a
    // node is counted as other, and the error it leaves is cleared.
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) {
      cudaGetLastError();
      ++stats.other;
      continue;
    }
    switch (type) {
      case cudaGraphNodeTypeKernel:
        ++stats.kernels;
        break;
      case cudaGraphNodeTypeMemset:
        ++stats.memsets;
        break;
      case cudaGraphNodeTypeMemcpy:
        ++stats.memcpys;
        break;
      case cudaGraphNodeTypeGraph: {
        // A library may capture its work as a child graph: count what runs.
        cudaGraph_t child = nullptr;
        CUDA_CHECK(cudaGraphChildGraphNodeGetGraph(node, &child));
        const GraphStats c = count_nodes(child);
        stats.kernels += c.kernels;
        stats.memsets += c.memsets;
        stats.memcpys += c.memcpys;
        stats.other += c.other;
        break;
      }
      default:
        ++stats.other;
        break;
    }
  }
  return stats;
}

GraphRecorder::~GraphRecorder() {
  abort();
  for (cudaGraphExec_t exec : execs_) {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
}

void GraphRecorder::begin() {
  // Thread-local mode: a call on this thread that cannot be captured (a
  // synchronisation, an allocation) fails the capture and is reported; other
  // threads' CUDA calls are left alone.
  const cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) fail("CUDA graph capture could not start", err);
}

GraphStats GraphRecorder::end(bool instantiate, int slot) {
  if (slot < 0 || slot >= kGraphSlots) {
    abort();
    throw RuntimeFailure("CUDA graph capture: slot " + std::to_string(slot) + " out of range");
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(stream_, &graph);
  if (err != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    fail("CUDA graph capture failed", err != cudaSuccess ? err : cudaErrorStreamCaptureInvalidated);
  }
  GraphStats stats;
  try {
    stats = count_nodes(graph);
  } catch (...) {
    cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  if (!instantiate) {
    cudaGraphDestroy(graph);
    return stats;
  }
  cudaGraphExec_t exec = nullptr;
  // Node priorities: the ones each kernel node got from its stream at
  // capture (CudaBackend's main, weight-gradient and update streams), not
  // the launch stream's one priority for every node.
  const cudaError_t inst =
      cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  if (inst != cudaSuccess) fail("CUDA graph instantiation failed", inst);
  cudaGraphExec_t& kept = execs_[slot];
  if (kept != nullptr) cudaGraphExecDestroy(kept);
  kept = exec;
  return stats;
}

void GraphRecorder::abort() noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream_, &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);  // fails for an invalidated capture: nothing to keep
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  cudaGetLastError();
}

void GraphRecorder::launch(int slot) {
  if (slot < 0 || slot >= kGraphSlots || execs_[slot] == nullptr) {
    throw RuntimeFailure("CUDA graph replay: no graph has been captured in slot " +
                         std::to_string(slot));
  }
  CUDA_CHECK(cudaGraphLaunch(execs_[slot], stream_));
}

PinnedUploader::PinnedUploader(cudaStream_t stream) : stream_(stream) {
  CUDA_CHECK(cudaEventCreateWithFlags(&last_copy_, cudaEventDisableTiming));
}

PinnedUploader::~PinnedUploader() {
  // Destructors must not throw: a copy still reading the buffer is waited
  // for, errors while tearing down are ignored.
  if (copies_pending_) cudaEventSynchronize(last_copy_);
  if (last_copy_ != nullptr) cudaEventDestroy(last_copy_);
  if (buffer_ != nullptr) cudaFreeHost(buffer_);
}

void PinnedUploader::reserve(std::size_t bytes) {
  if (used_ + bytes <= capacity_) return;
  // Reusing (or freeing) the buffer: every copy out of it must be done.
  if (copies_pending_) {
    CUDA_CHECK(cudaEventSynchronize(last_copy_));
    copies_pending_ = false;
  }
  used_ = 0;
  if (bytes <= capacity_) return;
  if (buffer_ != nullptr) {
    CUDA_CHECK(cudaFreeHost(buffer_));
    buffer_ = nullptr;
    capacity_ = 0;
  }
  const std::size_t capacity = std::max(kMinStagingBytes, 4 * bytes);
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, capacity);
  if (err != cudaSuccess) {
    fail("CUDA: cannot allocate " + std::to_string(capacity) + " bytes of pinned staging memory",
         err);
  }
  buffer_ = static_cast<char*>(p);
  capacity_ = capacity;
}

void PinnedUploader::upload(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  // Inside a capture the copy would become a graph node that replays the
  // staged bytes of the capture at every step.
  if (is_capturing(stream_)) {
    throw RuntimeFailure(
        "upload_async inside a graph capture: per-step inputs are copied before the replay");
  }
  const std::size_t slot = round_up(bytes, kSlotAlign);
  reserve(slot);
  char* staged = buffer_ + used_;
  std::memcpy(staged, host_src, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaEventRecord(last_copy_, stream_));
  copies_pending_ = true;
  used_ += slot;
}

PinnedReadback::PinnedReadback(cudaStream_t stream, std::size_t bytes)
    : stream_(stream), capacity_(bytes) {
  CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, std::max<std::size_t>(bytes, 1));
  if (err != cudaSuccess) {
    cudaEventDestroy(copied_);
    fail("CUDA: cannot allocate " + std::to_string(bytes) + " bytes of pinned readback memory",
         err);
  }
  buffer_ = static_cast<char*>(p);
}

PinnedReadback::~PinnedReadback() {
  // A copy still writing the buffer is waited for; teardown errors ignored.
  if (pending_) cudaEventSynchronize(copied_);
  cudaEventDestroy(copied_);
  cudaFreeHost(buffer_);
}

void PinnedReadback::copy_from(const void* src, std::size_t bytes) {
  if (bytes > capacity_) {
    throw RuntimeFailure("readback of " + std::to_string(bytes) + " bytes into " +
                         std::to_string(capacity_));
  }
  if (is_capturing(stream_)) {
    throw RuntimeFailure("readback inside a graph capture: results are copied after the replay");
  }
  CUDA_CHECK(cudaMemcpyAsync(buffer_, src, bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaEventRecord(copied_, stream_));
  pending_ = true;
}

const void* PinnedReadback::wait() {
  if (pending_) {
    CUDA_CHECK(cudaEventSynchronize(copied_));
    pending_ = false;
  }
  return buffer_;
}

}  // namespace tinyllama::cuda
