#pragma once
// A CPU backend that runs each Backend::side_gemm_from_fork GEMM on its
// operands as they stood at the fork (fork_side_gemms), the earliest moment
// the contract allows: every block it allocated is copied at the fork, put
// back for the GEMM, and the present restored around the GEMM's output. An
// op between the fork and the GEMM that writes what the GEMM reads then
// changes the result of a CPU test, whichever op it is.
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

#include "cpu/cpu_backend.h"

namespace tinyllama {

class ForkPointGemms : public CpuBackend {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = CpuBackend::allocate(bytes);
    blocks_[p] = bytes;
    return p;
  }
  void release(void* p) override {
    blocks_.erase(p);
    CpuBackend::release(p);
  }
  void fork_side_gemms() override {
    at_fork_.clear();
    for (const auto& [p, bytes] : blocks_) {
      const auto* b = static_cast<const unsigned char*>(p);
      at_fork_[p].assign(b, b + bytes);
    }
  }
  std::int64_t side_gemm_from_fork(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                   float beta) override {
    at_fork_point(c, [&] { CpuBackend::gemm(c, a, trans_a, b, trans_b, alpha, beta); });
    return 0;
  }
  // The FP8 weight gradients (model_fp8.cc): their codes and scales as
  // they stood at the fork.
  std::int64_t side_gemm_fp8_from_fork(Mat c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                                       bool trans_b, bool accumulate) override {
    at_fork_point(c, [&] { CpuBackend::gemm_fp8(c, a, trans_a, b, trans_b, accumulate); });
    ++fp8_from_fork_;
    return 0;
  }

  int from_fork() const { return from_fork_; }
  int fp8_from_fork() const { return fp8_from_fork_; }

 private:
  // Runs `gemm` (writing c) on the blocks as they stood at the fork, then
  // puts the present back around c's rows.
  template <typename Gemm>
  void at_fork_point(Mat c, Gemm&& gemm) {
    if (at_fork_.empty()) throw std::logic_error("side_gemm_from_fork without fork_side_gemms");
    std::map<void*, std::vector<unsigned char>> now;
    for (const auto& [p, bytes] : at_fork_) {
      auto* b = static_cast<unsigned char*>(p);
      now[p].assign(b, b + bytes.size());
      std::memcpy(p, bytes.data(), bytes.size());
    }
    // c keeps the present contents where the GEMM does not write (beta 0)
    // or adds to them (beta 1: the LM head's chunks accumulate in order).
    copy_rows(c, now, /*into_memory=*/true);
    gemm();
    copy_rows(c, now, /*into_memory=*/false);
    for (const auto& [p, bytes] : now) std::memcpy(p, bytes.data(), bytes.size());
    ++from_fork_;
  }
  // Copies c's rows between memory and the saved present (`now`, keyed by
  // the block that holds c).
  void copy_rows(Mat c, std::map<void*, std::vector<unsigned char>>& now, bool into_memory) const {
    auto* start = static_cast<unsigned char*>(c.data);
    for (auto& [p, bytes] : now) {
      auto* base = static_cast<unsigned char*>(p);
      if (start < base || start >= base + bytes.size()) continue;
      const std::size_t elem = dtype_size(c.dtype);
      for (std::int64_t r = 0; r < c.rows; ++r) {
        const std::size_t off = static_cast<std::size_t>(start - base) + r * c.ld * elem;
        const std::size_t n = static_cast<std::size_t>(c.cols) * elem;
        if (into_memory) {
          std::memcpy(base + off, bytes.data() + off, n);
        } else {
          std::memcpy(bytes.data() + off, base + off, n);
        }
      }
      return;
    }
    throw std::logic_error("side_gemm_from_fork: c is in no block this backend allocated");
  }

  std::map<void*, std::size_t> blocks_;
  std::map<void*, std::vector<unsigned char>> at_fork_;
  int from_fork_ = 0;
  int fp8_from_fork_ = 0;
};

}  // namespace tinyllama
