#pragma once
// The host side of the profiler: nested named time ranges (step -> phase ->
// layer -> op) recorded by the op markers while a profiler is active. The
// recorder is fed from the training thread only, through the op markers'
// observer interface (core/op_marker.h).
#include <cstdint>
#include <string>
#include <vector>

#include "core/op_marker.h"

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

class HostRangeRecorder final : public OpObserver {
 public:
  HostRangeRecorder();

  // Opens a range inside the innermost open one; returns its index.
  int open(const char* name) override;
  // Closes the range `index` (and, defensively, anything opened inside it
  // that was left open).
  void close(int index) noexcept override;

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

}  // namespace tinyllama::prof
