#pragma once
// The host machinery that whole-step CUDA graphs need besides the kernels
// themselves: a recorder that turns one stream's work into a graph and
// replays it, an uploader that feeds per-step inputs (batch, step scalars)
// to fixed device buffers without waiting for the device, and a readback
// that copies a step's results out before the next step overwrites them.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "model/device_services.h"

namespace tinyllama::cuda {

// Records the work enqueued on one stream between begin() and end() as a
// graph (stream capture, thread-local mode: only calls from the capturing
// thread can break it, not a profiler or logger on another thread) and
// launches it on the same stream. It keeps one instantiated graph per slot
// (kGraphSlots), so steps in flight can each replay their own.
class GraphRecorder {
 public:
  explicit GraphRecorder(cudaStream_t stream) : stream_(stream) {}
  ~GraphRecorder();
  GraphRecorder(const GraphRecorder&) = delete;
  GraphRecorder& operator=(const GraphRecorder&) = delete;

  void begin();
  // See DeviceServices::end_capture.
  GraphStats end(bool instantiate, int slot);
  // See DeviceServices::abort_capture.
  void abort() noexcept;
  void launch(int slot);

 private:
  cudaStream_t stream_;
  cudaGraphExec_t execs_[kGraphSlots] = {};
};

// Node counts of a graph, child graphs included (counted by their nodes).
GraphStats count_nodes(cudaGraph_t graph);

// Whether work enqueued on the stream is being recorded rather than run.
bool is_capturing(cudaStream_t stream);

// Host-to-device copies that return at once: the bytes are copied into a
// pinned staging buffer and DMA'd from there in stream order. The buffer is
// reused from its start once the copies already in it have completed
// (an event after the latest copy says so), so a caller never waits unless
// it runs ahead of the device by a whole buffer.
class PinnedUploader {
 public:
  explicit PinnedUploader(cudaStream_t stream);
  ~PinnedUploader();
  PinnedUploader(const PinnedUploader&) = delete;
  PinnedUploader& operator=(const PinnedUploader&) = delete;

  void upload(void* dst, const void* host_src, std::size_t bytes);

 private:
  void reserve(std::size_t bytes);

  cudaStream_t stream_;
  cudaEvent_t last_copy_ = nullptr;  // recorded after the latest copy
  bool copies_pending_ = false;
  char* buffer_ = nullptr;  // pinned
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
};

// Device-to-host copies into pinned memory, stream-ordered: the host reads
// them when an event after the copy has completed, while later work runs.
class PinnedReadback final : public HostReadback {
 public:
  PinnedReadback(cudaStream_t stream, std::size_t bytes);
  ~PinnedReadback() override;
  PinnedReadback(const PinnedReadback&) = delete;
  PinnedReadback& operator=(const PinnedReadback&) = delete;

  void copy_from(const void* src, std::size_t bytes) override;
  const void* wait() override;

 private:
  cudaStream_t stream_;
  cudaEvent_t copied_ = nullptr;
  char* buffer_ = nullptr;  // pinned
  std::size_t capacity_ = 0;
  bool pending_ = false;
};

}  // namespace tinyllama::cuda
