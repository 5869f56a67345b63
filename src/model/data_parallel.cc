#include "model/data_parallel.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tinyllama {

std::string DataParallel::describe() const {
  if (!enabled) return "off";
  return std::to_string(world) + (world == 1 ? " rank" : " ranks") +
         (shard_optimizer ? ", ZeRO-1 (AdamW state sharded)" : ", gradients all-reduced");
}

// Why 27 and only beside the exchange (docs/log/2026-11-30.md, tenth
// session): the exchange's stream runs each layer's reduce-scatter (NCCL
// 2.28's symmetric kernel, 9 thread blocks), then its AdamW sweep and its
// gather, and the sweep needs SMs too. At 1 B on 2 x H200, with the GEMMs'
// algorithms as cuBLASLt's heuristic ranks them, leaving 9 or 18 SMs
// starved the sweeps (112.8 and 111.3 ms a step, 10 ms of them after the
// backward pass); 27 ran 107.3, as the timed choices do with 9 -- which
// fall into the same backlog in some processes (111.1). With the timed
// choices 27 costs 0.3 ms (107.6-107.9 against 107.4); FP8 ran 80.5
// against 80.7. The forward pass runs beside no kernel of NCCL's (its
// gathers run on the copy engines). One process exchanges nothing: no
// GEMM runs beside an exchange, whatever is asked.
int gemm_sm_margin_for(const DataParallel& dp, long requested) {
  if (!dp.enabled || dp.world <= 1) return 0;
  if (requested >= 0) return static_cast<int>(requested);
  constexpr int kReduceScatterBlocks = 9;
  constexpr int kSweepSms = 18;
  return kReduceScatterBlocks + kSweepSms;
}

BucketShard shard_of(ParamSpan bucket, const DataParallel& dp, int rank) {
  if (rank < 0 || rank >= dp.world) throw std::invalid_argument("shard_of: rank out of range");
  if (!dp.shard_optimizer) return {bucket, bucket.begin};
  if (bucket.begin % dp.world != 0 || bucket.size() % dp.world != 0) {
    throw std::invalid_argument("shard_of: bucket [" + std::to_string(bucket.begin) + ", " +
                                std::to_string(bucket.end) + ") is not a multiple of " +
                                std::to_string(dp.world) + " ranks");
  }
  const std::int64_t shard = bucket.size() / dp.world;
  const std::int64_t begin = bucket.begin + rank * shard;
  return {{begin, begin + shard}, bucket.begin / dp.world};
}

void copy_slots(const ParamLayout& from, const void* src, const ParamLayout& to, void* dst,
                std::size_t elem) {
  if (from.slots().size() != to.slots().size()) {
    throw std::invalid_argument("copy_slots: layouts of different models");
  }
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  for (std::size_t i = 0; i < from.slots().size(); ++i) {
    const ParamSlot& a = from.slots()[i];
    const ParamSlot& b = to.slots()[i];
    if (a.rows != b.rows || a.cols != b.cols) {
      throw std::invalid_argument("copy_slots: slot " + a.name + " differs");
    }
    const std::int64_t rows = std::min(a.stored_rows, b.stored_rows);
    std::memcpy(out + static_cast<std::size_t>(b.offset) * elem,
                in + static_cast<std::size_t>(a.offset) * elem,
                static_cast<std::size_t>(rows * a.cols) * elem);
  }
}

}  // namespace tinyllama
