#pragma once
// The host side of the profiler: nested named time ranges (step -> phase ->
// layer -> op) recorded by the op markers while a profiler is active. The
// recorder is fed from the training thread only; the markers check one
// pointer when no profiler is active, so unprofiled runs pay nothing more.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace tinyllama::prof {

// Nanoseconds on the steady clock. The CUPTI collector reports GPU activity
// on this same clock, so host ranges and kernels share one time axis.
std::int64_t host_now_ns() noexcept;

struct HostRange {
  const char* name = "";  // static storage: a literal or a layer label
  int parent = -1;        // index of the enclosing range, -1 at the top
  int depth = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = -1;  // -1 while open
};

class HostRangeRecorder {
 public:
  HostRangeRecorder();

  // Opens a range inside the innermost open one; returns its index.
  int open(const char* name);
  // Closes the range `index` (and, defensively, anything opened inside it
  // that was left open).
  void close(int index) noexcept;

  const std::vector<HostRange>& ranges() const { return ranges_; }
  bool idle() const { return stack_.empty(); }
  // Range names from the top down to `index`, joined by '/' ("step/forward/layer3/qkv_gemm").
  std::string path(int index) const;
  // The path of the innermost open range, "" when none is open.
  std::string open_path() const;
  // Forgets every range; only when none is open (the indices held by open
  // markers must stay valid). Returns whether it cleared.
  bool clear();

 private:
  std::vector<HostRange> ranges_;
  std::vector<int> stack_;
};

namespace detail {
inline std::atomic<HostRangeRecorder*> active_recorder{nullptr};
}

// The recorder the op markers feed, or null when no profiler is active.
inline HostRangeRecorder* active_recorder() noexcept {
  return detail::active_recorder.load(std::memory_order_relaxed);
}
inline void set_active_recorder(HostRangeRecorder* recorder) noexcept {
  detail::active_recorder.store(recorder, std::memory_order_relaxed);
}

}  // namespace tinyllama::prof
