#pragma once
// A second stream for work that may overlap the main stream's: the weight-
// gradient GEMMs of the backward pass, which nothing reads until the
// optimizer. Inside a stream capture the fork and join events become edges,
// so the captured step holds those GEMMs on a parallel branch of the graph;
// the GPU then runs each one beside the input-gradient GEMM and the
// elementwise work that follow it, where either alone would leave SMs idle.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>

namespace tinyllama::cuda {

class SideBranch {
 public:
  // priority: the stream's (cudaStreamCreateWithPriority; lower numbers run
  // first). A capture copies it into each kernel node it records.
  explicit SideBranch(int priority = 0);
  ~SideBranch();
  SideBranch(const SideBranch&) = delete;
  SideBranch& operator=(const SideBranch&) = delete;

  cudaStream_t stream() const { return side_; }
  // Orders the side stream after everything enqueued on `main` so far.
  void fork(cudaStream_t main);
  // Marks the side work enqueued so far; the ticket names that point.
  std::int64_t mark();
  // Orders everything enqueued on `main` from now on after the side work up
  // to `ticket` (and, the side stream being in order, everything before it).
  void join(cudaStream_t main, std::int64_t ticket);
  // join() for all side work marked so far; a no-op when none is pending.
  void join_all(cudaStream_t main);
  // Orders everything enqueued on `other` from now on after the side work
  // marked so far that is not joined into main yet (joined work is ordered
  // by a fork from main already).
  void order_after_pending(cudaStream_t other) const;
  // Drops unjoined tickets: after an aborted capture their events belong
  // to a discarded recording and must not be waited on.
  void forget_pending();
  // Blocks the host until the side stream is idle (teardown).
  void synchronize() const;

 private:
  // A ticket's event is reused kRing tickets later. Joining an older ticket
  // then waits for a later record on the same in-order stream: later than
  // needed, never too early.
  static constexpr int kRing = 64;
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_event_ = nullptr;
  std::array<cudaEvent_t, kRing> done_{};
  std::int64_t next_ticket_ = 0;
  std::int64_t joined_ = 0;  // tickets below this are joined into main
};

}  // namespace tinyllama::cuda
