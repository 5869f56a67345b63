#pragma once
// Marks the ops of a step once, for every tool at once (DESIGN §3): each
// marker is an NVTX range (so nsys and `ncu --nvtx` see the names) and, while
// an observer is attached (the built-in profiler, src/prof), a call to it.
// The interface lives here, at the bottom of the layers, so the model passes
// mark their ops without knowing the profiler. Markers nest:
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
#include <atomic>

namespace tinyllama {

// Told of every op marker's opening and closing while attached. Called from
// the training thread only.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // A range named `name` opens inside the innermost open one; returns a
  // handle that close() gets back.
  virtual int open(const char* name) = 0;
  virtual void close(int handle) noexcept = 0;
};

namespace detail {
inline std::atomic<OpObserver*> op_observer{nullptr};
}

// The observer the markers feed, or null: one pointer check per marker when
// nothing is attached, so unprofiled runs pay nothing more.
inline OpObserver* op_observer() noexcept {
  return detail::op_observer.load(std::memory_order_relaxed);
}
inline void set_op_observer(OpObserver* observer) noexcept {
  detail::op_observer.store(observer, std::memory_order_relaxed);
}

void nvtx_push(const char* name) noexcept;
void nvtx_pop() noexcept;

// "layer3": a name of static storage for layer l (made once per layer).
const char* layer_label(int layer);

class OpScope {
 public:
  explicit OpScope(const char* name) : recorder_(op_observer()) {
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
  OpObserver* recorder_;
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
    recorder_ = op_observer();
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
  OpObserver* recorder_ = nullptr;
  int index_ = -1;
  bool open_ = false;
};

}  // namespace tinyllama
