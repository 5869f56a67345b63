#include "device/cuda_side_branch.h"

#include <algorithm>

#include "device/cuda_check.h"

namespace tinyllama::cuda {

SideBranch::SideBranch(int priority) {
  CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, priority));
  // Ordering only: no timing, so the cheaper events.
  CUDA_CHECK(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming));
  for (cudaEvent_t& e : done_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

SideBranch::~SideBranch() {
  if (side_ != nullptr) cudaStreamSynchronize(side_);
  for (cudaEvent_t e : done_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (fork_event_ != nullptr) cudaEventDestroy(fork_event_);
  if (side_ != nullptr) cudaStreamDestroy(side_);
}

void SideBranch::fork(cudaStream_t main) {
  CUDA_CHECK(cudaEventRecord(fork_event_, main));
  CUDA_CHECK(cudaStreamWaitEvent(side_, fork_event_, 0));
}

std::int64_t SideBranch::mark() {
  const std::int64_t ticket = next_ticket_++;
  CUDA_CHECK(cudaEventRecord(done_[static_cast<std::size_t>(ticket % kRing)], side_));
  return ticket;
}

void SideBranch::join(cudaStream_t main, std::int64_t ticket) {
  if (ticket < joined_ || ticket >= next_ticket_) return;  // joined already, or never marked
  // A ticket kRing or more behind the latest has had its event re-recorded:
  // wait for the latest record instead (later on the same stream: safe).
  if (ticket <= next_ticket_ - kRing) ticket = next_ticket_ - 1;
  CUDA_CHECK(cudaStreamWaitEvent(main, done_[static_cast<std::size_t>(ticket % kRing)], 0));
  joined_ = std::max(joined_, ticket + 1);
}

void SideBranch::join_all(cudaStream_t main) {
  if (next_ticket_ > joined_) join(main, next_ticket_ - 1);
}

void SideBranch::order_after_pending(cudaStream_t other) const {
  if (next_ticket_ == joined_) return;
  // The latest mark: the side stream is in order, so it covers every
  // earlier one (and outlives ring reuse, being the newest record).
  CUDA_CHECK(
      cudaStreamWaitEvent(other, done_[static_cast<std::size_t>((next_ticket_ - 1) % kRing)], 0));
}

void SideBranch::forget_pending() {
  joined_ = next_ticket_;
}

void SideBranch::synchronize() const {
  CUDA_CHECK(cudaStreamSynchronize(side_));
}

}  // namespace tinyllama::cuda
