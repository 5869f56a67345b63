#pragma once
// Collectives between threads of one process: the stand-in for NCCL in the
// CPU tests of data-parallel training. Each rank is a thread with its own
// CPU backend and model; an op completes before it returns (the CPU backend
// has no stream), and it reads the other ranks' buffers directly, between
// barriers, summing in rank order.
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "model/collectives.h"

namespace tinyllama {

class ThreadHub {
 public:
  explicit ThreadHub(int world) : world_(world), barrier_(world), buffers_(world) {}
  int world() const { return world_; }
  // Every rank publishes its buffer, then waits for the others.
  void publish(int rank, void* data) {
    buffers_[static_cast<std::size_t>(rank)] = data;
    barrier_.arrive_and_wait();
  }
  void* buffer(int rank) const { return buffers_[static_cast<std::size_t>(rank)]; }
  void wait() { barrier_.arrive_and_wait(); }

 private:
  int world_;
  std::barrier<> barrier_;
  std::vector<void*> buffers_;
};

class ThreadCollectives : public Collectives {
 public:
  ThreadCollectives(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return hub_.world(); }
  std::string description() const override { return "threads"; }

  void all_reduce(void* data, std::int64_t count, DType dtype, ReduceOp op,
                  void* /*stream*/) override {
    reduce_block(data, 0, count, dtype, op);
  }
  void reduce_scatter(void* data, std::int64_t shard, DType dtype, ReduceOp op,
                      void* /*stream*/) override {
    reduce_block(data, rank_ * shard, shard, dtype, op);
  }
  void all_gather(void* data, std::int64_t shard, DType dtype, void* /*stream*/) override {
    const std::size_t bytes = static_cast<std::size_t>(shard) * dtype_size(dtype);
    hub_.publish(rank_, data);
    // Rank k never writes its own block k here, so it can be read while
    // every rank fills the others.
    for (int k = 0; k < world(); ++k) {
      if (k == rank_) continue;
      std::memcpy(static_cast<char*>(data) + k * bytes,
                  static_cast<const char*>(hub_.buffer(k)) + k * bytes, bytes);
    }
    hub_.wait();
  }
  void all_reduce_max(std::int32_t* flag, void* /*stream*/) override {
    hub_.publish(rank_, flag);
    std::int32_t most = *flag;
    for (int k = 0; k < world(); ++k) {
      most = std::max(most, *static_cast<const std::int32_t*>(hub_.buffer(k)));
    }
    hub_.wait();  // everyone has read before anyone writes
    *flag = most;
    hub_.wait();
  }
  std::string text_from_rank0(const std::string& text) override {
    hub_.publish(rank_, const_cast<std::string*>(&text));
    std::string out = *static_cast<const std::string*>(hub_.buffer(0));
    hub_.wait();  // rank 0's string outlives every read
    return out;
  }

 private:
  // data[begin, begin + count) = op over the ranks, read before any rank writes.
  void reduce_block(void* data, std::int64_t begin, std::int64_t count, DType dtype, ReduceOp op) {
    hub_.publish(rank_, data);
    std::vector<double> sum(static_cast<std::size_t>(count), 0.0);
    for (int k = 0; k < world(); ++k) {
      for (std::int64_t i = 0; i < count; ++i) {
        const double v = load(hub_.buffer(k), begin + i, dtype);
        sum[i] = op != ReduceOp::Max ? sum[i] + v : k == 0 ? v : std::max(sum[i], v);
      }
    }
    hub_.wait();
    for (std::int64_t i = 0; i < count; ++i) {
      store(data, begin + i, dtype, sum[i]);
    }
    hub_.wait();
  }
  static double load(const void* p, std::int64_t i, DType t) {
    if (t == DType::F64) return static_cast<const double*>(p)[i];
    if (t == DType::F32) return static_cast<const float*>(p)[i];
    throw std::invalid_argument("ThreadCollectives: float32 or float64 only");
  }
  static void store(void* p, std::int64_t i, DType t, double v) {
    if (t == DType::F64) {
      static_cast<double*>(p)[i] = v;
    } else {
      static_cast<float*>(p)[i] = static_cast<float>(v);
    }
  }

  ThreadHub& hub_;
  int rank_;
};

// Runs body(comm, rank) for each of `world` ranks, each on its own thread
// with its own ThreadCollectives, and returns each rank's exception message
// ("" where it threw nothing): an uncaught one would end the process.
inline std::vector<std::string> run_on_threads(
    int world, const std::function<void(ThreadCollectives& comm, int rank)>& body) {
  ThreadHub hub(world);
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ThreadCollectives comm(hub, r);
      try {
        body(comm, r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace tinyllama
