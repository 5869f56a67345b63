#include "device/cuda_event_timer.h"

#include <string>
#include <vector>

#include "core/errors.h"
#include "device/cuda_check.h"
#include "device/cuda_graph.h"

namespace tinyllama::cuda {
namespace {

class CudaEventTimer final : public EventTimer {
 public:
  CudaEventTimer(int marks, cudaStream_t stream) : stream_(stream) {
    if (marks < 1) throw RuntimeFailure("make_timer: need at least one mark");
    events_.resize(static_cast<std::size_t>(marks), nullptr);
    for (cudaEvent_t& e : events_) CUDA_CHECK(cudaEventCreate(&e));
  }
  ~CudaEventTimer() override {
    for (cudaEvent_t e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  void record(int mark) override {
    // Inside a stream capture a plain record only orders the capture; the
    // external flag makes it a graph node that records the event at every
    // replay, so phase timing survives whole-step graphs.
    if (is_capturing(stream_)) {
      CUDA_CHECK(cudaEventRecordWithFlags(event(mark), stream_, cudaEventRecordExternal));
    } else {
      CUDA_CHECK(cudaEventRecord(event(mark), stream_));
    }
  }
  double elapsed_ms(int from_mark, int to_mark) override {
    float ms = 0.f;
    cudaError_t err = cudaEventSynchronize(event(to_mark));
    if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, event(from_mark), event(to_mark));
    if (err != cudaSuccess) {
      // Not sticky: cleared, so a caller that falls back to whole-step
      // timing does not see it again at the next kernel launch check.
      cudaGetLastError();
      throw RuntimeFailure(std::string("CUDA event timing failed: ") + cudaGetErrorString(err));
    }
    return ms;
  }

 private:
  cudaEvent_t event(int mark) const {
    if (mark < 0 || mark >= static_cast<int>(events_.size())) {
      throw RuntimeFailure("EventTimer: mark " + std::to_string(mark) + " out of range");
    }
    return events_[static_cast<std::size_t>(mark)];
  }
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

std::unique_ptr<EventTimer> make_event_timer(int marks, cudaStream_t stream) {
  return std::make_unique<CudaEventTimer>(marks, stream);
}

}  // namespace tinyllama::cuda
