#include "core/op_marker.h"

#include <deque>
#include <mutex>
#include <string>

#if defined(TINYLLAMA_HAS_CUDA)
#include <nvtx3/nvToolsExt.h>
#endif

namespace tinyllama {

void nvtx_push(const char* name) noexcept {
#if defined(TINYLLAMA_HAS_CUDA)
  nvtxRangePushA(name);
#else
  (void)name;
#endif
}

void nvtx_pop() noexcept {
#if defined(TINYLLAMA_HAS_CUDA)
  nvtxRangePop();
#endif
}

const char* layer_label(int layer) {
  // A deque never moves its elements, so handed-out pointers stay valid as
  // it grows; the lock is uncontended (one training thread) and taken once
  // per layer per pass, not per op.
  static std::mutex mutex;
  static std::deque<std::string> labels;
  const std::lock_guard<std::mutex> lock(mutex);
  while (static_cast<int>(labels.size()) <= layer) {
    labels.push_back("layer" + std::to_string(labels.size()));
  }
  return layer < 0 ? "layer?" : labels[static_cast<std::size_t>(layer)].c_str();
}

}  // namespace tinyllama
