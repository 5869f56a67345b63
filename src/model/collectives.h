#pragma once
// Collectives across the ranks of a data-parallel run (one process per GPU,
// or threads in the CPU tests), stream-ordered with the backend's work.
// The model calls them at fixed points of every step, in the same order on
// every rank -- the contract NCCL needs -- and never inside an op.
//
// `stream` is the backend's opaque stream handle (Backend::
// side_collective_stream / main_stream_handle): the op is enqueued there
// and may be captured into the step's graph. A backend that runs ops at
// once (the CPU) passes nullptr and the op completes before returning.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace tinyllama {

enum class ReduceOp { Sum, Max };

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // One line for the run header, e.g. "nccl 2.28.9, 2 ranks".
  virtual std::string description() const = 0;

  // data[0, count) = op over the ranks of data[0, count), on every rank.
  virtual void all_reduce(void* data, std::int64_t count, DType dtype, ReduceOp op,
                          void* stream) = 0;
  // In place over data[0, world * shard): rank r's block [r*shard, (r+1)*shard)
  // becomes op over the ranks of that block; the other blocks are left
  // undefined (they may hold partial results).
  virtual void reduce_scatter(void* data, std::int64_t shard, DType dtype, ReduceOp op,
                              void* stream) = 0;
  // In place over data[0, world * shard): every rank's block r becomes rank
  // r's block r.
  virtual void all_gather(void* data, std::int64_t shard, DType dtype, void* stream) = 0;
  // *flag = the largest *flag over the ranks (a one-element int32 max: the
  // fp16 overflow flag, so every rank skips the same steps).
  virtual void all_reduce_max(std::int32_t* flag, void* stream) = 0;
  // Rank 0's `text` on every rank, between steps (host strings; returns once
  // it has arrived): the choices a rank makes by timing -- GEMM algorithms,
  // attention=auto -- which every rank must make alike, or a run resumed
  // with rank 0's recorded choices would round differently on the others.
  virtual std::string text_from_rank0(const std::string& text) = 0;

  // `bytes` of device memory that every rank's collectives reach directly,
  // for a buffer the ranks reduce or gather in place (NCCL: a symmetric
  // window, so the gathers can run on the copy engines and the sums on
  // NCCL's symmetric kernels, which take few SMs from the kernels beside
  // them). Every rank calls it alike, in the same order;
  // nullptr where these collectives offer no such memory (the caller
  // allocates as usual). release_window frees it, on every rank alike.
  virtual void* allocate_window(std::size_t /*bytes*/) { return nullptr; }
  virtual void release_window(void* /*window*/) {}
};

}  // namespace tinyllama
