#pragma once
// A CPU backend that runs side work at the latest (or earliest) moment the
// Backend contract allows, so that a missing or misplaced join changes the
// result of a CPU test: each side GEMM (Backend::side_gemm) when its ticket
// is joined, each side update (Backend::side_adamw_fused) when its ticket or
// all of them are joined.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>

#include "cpu/cpu_backend.h"

namespace tinyllama {

class LateSideGemms : public CpuBackend {
 public:
  // Side updates (side_adamw_fused) run at the earliest moment the contract
  // allows -- right away, after the side GEMMs issued before them, which
  // finds an update issued before its gradients -- or, with late_updates,
  // at the latest: when its ticket (join_side_update) or every one
  // (join_side_updates) is joined.
  explicit LateSideGemms(bool late_updates = true) : late_updates_(late_updates) {}

  std::int64_t side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                         float beta) override {
    const std::int64_t ticket = next_++;
    pending_.push_back({ticket, [=, this] { gemm(c, a, trans_a, b, trans_b, alpha, beta); }});
    most_pending_ = std::max(most_pending_, pending_.size());
    ++deferred_;
    return ticket;
  }
  // The FP8 weight gradients (model_fp8.cc) are held back alike.
  std::int64_t side_gemm_fp8_from_fork(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                                       bool trans_b, bool accumulate) override {
    const std::int64_t ticket = next_++;
    pending_.push_back({ticket, [=, this] { gemm_fp8(c, a, trans_a, b, trans_b, accumulate); }});
    most_pending_ = std::max(most_pending_, pending_.size());
    ++deferred_;
    return ticket;
  }
  void join_side_gemm(std::int64_t ticket) override {
    while (!pending_.empty() && pending_.front().ticket <= ticket) run_front();
  }
  void join_side_gemms() override {
    while (!pending_.empty()) run_front();
  }
  std::int64_t side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                const AdamWHyper& hp) override {
    const std::int64_t ticket = next_update_++;
    updates_.push_back(
        {next_ - 1, [=, this] { adamw_fused(param, grad, m, v, compute_copy, hp); }});
    ++deferred_updates_;
    if (!late_updates_) join_side_updates();
    return ticket;
  }
  void join_side_update(std::int64_t ticket) override {
    // updates_ holds the tickets [next_update_ - size, next_update_).
    while (!updates_.empty() &&
           next_update_ - static_cast<std::int64_t>(updates_.size()) <= ticket) {
      run_update_front();
    }
  }
  void join_side_updates() override {
    while (!updates_.empty()) run_update_front();
  }

  std::size_t pending_updates() const { return updates_.size(); }
  int deferred_updates() const { return deferred_updates_; }

  std::size_t pending() const { return pending_.size(); }
  std::size_t most_pending() const { return most_pending_; }
  int deferred() const { return deferred_; }

 private:
  struct Pending {
    std::int64_t ticket;
    std::function<void()> run;
  };
  void run_update_front() {
    join_side_gemm(updates_.front().ticket);
    Pending u = std::move(updates_.front());
    updates_.pop_front();
    u.run();
  }
  void run_front() {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    p.run();
  }
  std::deque<Pending> pending_;
  std::deque<Pending> updates_;  // ticket: the last side GEMM before each
  bool late_updates_ = true;
  int deferred_updates_ = 0;
  std::int64_t next_ = 0;
  std::int64_t next_update_ = 0;
  std::size_t most_pending_ = 0;
  int deferred_ = 0;
};

}  // namespace tinyllama
