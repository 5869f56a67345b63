#pragma once
// Marks the ops of a step once, for every tool at once (DESIGN §3): each
// marker is an NVTX range (so nsys and `ncu --nvtx` see the names) and, while
// a profiler is active, a host range for the built-in profiler. Markers nest:
// step -> forward/backward/optimizer -> layer3 -> qkv_gemm, and the path of
// names ("forward/layer3/qkv_gemm") is the op's name in the cost model.
//
//   const OpScope phase("forward");     // one range for a scope
//   OpSequence ops;                     // consecutive ops at one level:
//   ops.next("attn_norm");  rmsnorm(...);
//   ops.next("qkv_gemm");   gemm(...);  // closes attn_norm, opens qkv_gemm
//
// Names must have static storage (string literals or layer_label()): the
// recorder keeps the pointer, not a copy, so marking costs no allocation.
// NVTX push/pop are compiled in whenever CUDA is; without a tool attached
// they return at once.
#include "prof/host_ranges.h"

namespace tinyllama::prof {

void nvtx_push(const char* name) noexcept;
void nvtx_pop() noexcept;

// "layer3": a name of static storage for layer l (made once per layer).
const char* layer_label(int layer);

class OpScope {
 public:
  explicit OpScope(const char* name) : recorder_(active_recorder()) {
    nvtx_push(name);
    if (recorder_ != nullptr) index_ = recorder_->open(name);
  }
  ~OpScope() {
    if (recorder_ != nullptr) recorder_->close(index_);
    nvtx_pop();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  HostRangeRecorder* recorder_;
  int index_ = -1;
};

class OpSequence {
 public:
  OpSequence() = default;
  ~OpSequence() { close(); }
  OpSequence(const OpSequence&) = delete;
  OpSequence& operator=(const OpSequence&) = delete;

  // Ends the current op, if any, and starts `name`.
  void next(const char* name) {
    close();
    nvtx_push(name);
    recorder_ = active_recorder();
    if (recorder_ != nullptr) index_ = recorder_->open(name);
    open_ = true;
  }
  // Ends the current op (before calling code that marks its own ops).
  void close() noexcept {
    if (!open_) return;
    if (recorder_ != nullptr) recorder_->close(index_);
    nvtx_pop();
    open_ = false;
  }

 private:
  HostRangeRecorder* recorder_ = nullptr;
  int index_ = -1;
  bool open_ = false;
};

}  // namespace tinyllama::prof
