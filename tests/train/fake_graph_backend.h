#pragma once
// A CPU backend that can "capture graphs" the way CUDA does, for testing the
// host side of whole-step graphs without a GPU: between begin_capture and
// end_capture every op is recorded as a closure instead of run, and replay()
// runs the closures. Like a CUDA graph, a closure keeps the arguments it was
// recorded with and reads memory only when it runs, so any per-step value a
// caller bakes into an op's arguments shows up as a wrong result on replay.
// Host synchronisation and allocation inside a capture throw, as they fail a
// CUDA stream capture.
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "cpu/cpu_backend.h"

namespace tinyllama::test {

class FakeGraphBackend final : public Backend {
 public:
  // Failure injection: refuse to instantiate, or throw from an op while capturing.
  bool fail_instantiate = false;
  bool fail_op_during_capture = false;
  int replays = 0;
  int captures = 0;

  std::string name() const override { return "fake-graph"; }
  std::string device_description() const override { return "cpu with fake graphs"; }
  // Captures, and runs side work in order at replay like a graph branch
  // that happens to finish first.
  DeviceCaps caps() const override {
    DeviceCaps caps = DeviceCaps::cpu();
    caps.graphs = true;
    caps.parallel_branches = true;
    return caps;
  }
  void prepare(const ModelConfig& c, BatchShape s, const StepPlan& plan) override {
    inner_.prepare(c, s, plan);
  }
  std::int64_t workspace_bytes() const override { return 0; }
  std::int64_t device_peak_used_bytes() override { return -1; }
  std::unique_ptr<EventTimer> make_timer(int marks) override {
    return std::make_unique<Timer>(*this, marks);
  }

  void* allocate(std::size_t bytes) override {
    refuse_in_capture("allocate");
    return inner_.allocate(bytes);
  }
  void release(void* p) override {
    refuse_in_capture("release");
    inner_.release(p);
  }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    refuse_in_capture("upload");
    inner_.upload(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    refuse_in_capture("download");
    inner_.download(dst, src, bytes);
  }
  void upload_async(void* dst, const void* src, std::size_t bytes) override {
    refuse_in_capture("upload_async");
    inner_.upload_async(dst, src, bytes);
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    enqueue(Kind::Memset, [=, this] { inner_.fill_zero(dst, bytes); });
  }

  bool supports_graphs() const override { return true; }
  void begin_capture() override {
    if (capturing_) throw RuntimeFailure("fake: capture already open");
    capturing_ = true;
    recording_.clear();
    stats_ = GraphStats{};
  }
  GraphStats end_capture(bool instantiate, int slot) override {
    capturing_ = false;
    const GraphStats stats = stats_;
    if (instantiate && fail_instantiate) {
      recording_.clear();
      throw RuntimeFailure("fake: instantiation refused");
    }
    if (instantiate) {
      graphs_.at(static_cast<std::size_t>(slot)) = std::move(recording_);
      ++captures;
    }
    recording_.clear();
    return stats;
  }
  void abort_capture() noexcept override {
    capturing_ = false;
    recording_.clear();
  }
  void replay(int slot) override {
    const auto& graph = graphs_.at(static_cast<std::size_t>(slot));
    if (graph.empty()) throw RuntimeFailure("fake: nothing captured in this slot");
    ++replays;
    for (const auto& f : graph) f();
  }

  void convert(Mat dst, Mat src) override {
    enqueue(Kind::Kernel, [=, this] { inner_.convert(dst, src); });
  }
  void gemm(Mat c, Mat a, bool ta, Mat b, bool tb, float alpha, float beta) override {
    enqueue(Kind::Kernel, [=, this] { inner_.gemm(c, a, ta, b, tb, alpha, beta); });
  }
  void quantize_fp8(Mat x, const Fp8Tensor& q, Fp8ScaleFrom from) override {
    enqueue(Kind::Kernel, [=, this] { inner_.quantize_fp8(x, q, from); });
  }
  void fp8_update_scales(float* blocks, int count, Fp8Format f) override {
    enqueue(Kind::Kernel, [=, this] { inner_.fp8_update_scales(blocks, count, f); });
  }
  void gemm_fp8(Mat c, const Fp8Tensor& a, bool ta, const Fp8Tensor& b, bool tb,
                bool accumulate) override {
    enqueue(Kind::Kernel, [=, this] { inner_.gemm_fp8(c, a, ta, b, tb, accumulate); });
  }
  void add(Mat out, Mat a, Mat b) override {
    enqueue(Kind::Kernel, [=, this] { inner_.add(out, a, b); });
  }
  void mul(Mat out, Mat a, Mat b) override {
    enqueue(Kind::Kernel, [=, this] { inner_.mul(out, a, b); });
  }
  void embedding_forward(Mat out, const std::int32_t* tokens, Mat table) override {
    enqueue(Kind::Kernel, [=, this] { inner_.embedding_forward(out, tokens, table); });
  }
  void embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) override {
    enqueue(Kind::Kernel, [=, this] { inner_.embedding_backward(dtable, tokens, dout); });
  }
  void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat w, double eps) override {
    enqueue(Kind::Kernel, [=, this] { inner_.rmsnorm_forward(out, rstd, x, w, eps); });
  }
  void rmsnorm_backward(Mat dx, Mat dw, Mat dout, Mat x, Mat w, Mat rstd) override {
    enqueue(Kind::Kernel, [=, this] { inner_.rmsnorm_backward(dx, dw, dout, x, w, rstd); });
  }
  void rmsnorm_apply(Mat out, Mat x, Mat w, Mat rstd) override {
    enqueue(Kind::Kernel, [=, this] { inner_.rmsnorm_apply(out, x, w, rstd); });
  }
  void add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat w, double eps) override {
    enqueue(Kind::Kernel, [=, this] { inner_.add_rmsnorm_forward(sum, out, rstd, a, b, w, eps); });
  }
  void rmsnorm_backward_add(Mat dx, Mat dw, Mat dout, Mat x, Mat w, Mat rstd, Mat dres) override {
    enqueue(Kind::Kernel,
            [=, this] { inner_.rmsnorm_backward_add(dx, dw, dout, x, w, rstd, dres); });
  }
  void rope_forward(Mat x, int seq, int hd, double theta) override {
    enqueue(Kind::Kernel, [=, this] { inner_.rope_forward(x, seq, hd, theta); });
  }
  void rope_backward(Mat dx, int seq, int hd, double theta) override {
    enqueue(Kind::Kernel, [=, this] { inner_.rope_backward(dx, seq, hd, theta); });
  }
  void attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k, Mat v,
                         const AttentionShape& shape) override {
    enqueue(Kind::Kernel,
            [=, this] { inner_.attention_forward(impl, out, lse, probs, q, k, v, shape); });
  }
  void attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v,
                          Mat out, Mat lse, Mat probs, const AttentionShape& shape) override {
    enqueue(Kind::Kernel, [=, this] {
      inner_.attention_backward(impl, dq, dk, dv, dout, q, k, v, out, lse, probs, shape);
    });
  }
  void silu_forward(Mat out, Mat x) override {
    enqueue(Kind::Kernel, [=, this] { inner_.silu_forward(out, x); });
  }
  void silu_backward(Mat dx, Mat dout, Mat x) override {
    enqueue(Kind::Kernel, [=, this] { inner_.silu_backward(dx, dout, x); });
  }
  void swiglu_forward(Mat out, Mat gate, Mat up) override {
    enqueue(Kind::Kernel, [=, this] { inner_.swiglu_forward(out, gate, up); });
  }
  void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) override {
    enqueue(Kind::Kernel, [=, this] { inner_.swiglu_backward(dgate, dup, dout, gate, up); });
  }
  void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) override {
    enqueue(Kind::Kernel, [=, this] { inner_.cross_entropy_forward(losses, logits, targets); });
  }
  void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                              float scale) override {
    enqueue(Kind::Kernel,
            [=, this] { inner_.cross_entropy_backward(dlogits, logits, targets, scale); });
  }
  void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                              const StepScalars* step) override {
    enqueue(Kind::Kernel,
            [=, this] { inner_.cross_entropy_backward(dlogits, logits, targets, step); });
  }
  void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                           const StepScalars* step) override {
    enqueue(Kind::Kernel, [=, this] { inner_.cross_entropy_fused(losses, logits, targets, step); });
  }
  void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) override {
    enqueue(Kind::Kernel, [=, this] { inner_.adamw(param, grad, m, v, hp); });
  }
  void sum_squares(Mat x, double* acc) override {
    enqueue(Kind::Kernel, [=, this] { inner_.sum_squares(x, acc); });
  }
  void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) override {
    enqueue(Kind::Kernel, [=, this] { inner_.clip_by_norm(acc, max_norm, step, norm); });
  }
  void flag_nonfinite(Mat x, std::int32_t* flag) override {
    enqueue(Kind::Kernel, [=, this] { inner_.flag_nonfinite(x, flag); });
  }

 private:
  enum class Kind { Kernel, Memset, Other };

  // Records steady-clock marks when the work before them runs: at replay
  // for marks recorded inside a capture, like a CUDA event-record node.
  class Timer final : public EventTimer {
   public:
    Timer(FakeGraphBackend& b, int marks) : backend_(b), marks_(static_cast<std::size_t>(marks)) {}
    void record(int mark) override {
      backend_.enqueue(Kind::Other,
                       [this, mark] { marks_.at(static_cast<std::size_t>(mark)) = Clock::now(); });
    }
    double elapsed_ms(int from, int to) override {
      const auto d =
          marks_.at(static_cast<std::size_t>(to)) - marks_.at(static_cast<std::size_t>(from));
      return std::chrono::duration<double, std::milli>(d).count();
    }

   private:
    using Clock = std::chrono::steady_clock;
    FakeGraphBackend& backend_;
    std::vector<Clock::time_point> marks_;
  };

  void enqueue(Kind kind, std::function<void()> f) {
    if (!capturing_) {
      f();
      return;
    }
    if (fail_op_during_capture) throw RuntimeFailure("fake: op not capturable");
    (kind == Kind::Kernel   ? stats_.kernels
     : kind == Kind::Memset ? stats_.memsets
                            : stats_.other)++;
    recording_.push_back(std::move(f));
  }
  void refuse_in_capture(const char* what) const {
    if (capturing_) throw RuntimeFailure(std::string("fake: ") + what + " inside a capture");
  }

  CpuBackend inner_;
  bool capturing_ = false;
  GraphStats stats_;
  std::vector<std::function<void()>> recording_;
  std::array<std::vector<std::function<void()>>, kGraphSlots> graphs_;
};

}  // namespace tinyllama::test
