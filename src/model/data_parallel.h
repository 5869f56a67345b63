#pragma once
// The arithmetic of a data-parallel step, shared by the model and its tests:
// which elements of a bucket each rank reduces and updates, and where its
// share of AdamW's moments lives.
//
// The buckets are ParamLayout's spans (the embedding, each layer, the final
// norm): a layer's gradients are final together in the backward pass, so
// its bucket is exchanged while the layers below are still computed.
// With the optimizer sharded (ZeRO-1) each bucket is cut into `world` equal
// shards; rank r reduce-scatters the gradients into shard r, updates it, and
// all-gathers the weights. The moment blocks then hold only each rank's
// shards, back to back: bucket [b, e) keeps its shard at b / world, since
// every bucket before it is a multiple of world long.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/param_layout.h"

namespace tinyllama {

struct DataParallel {
  int world = 1;                 // ranks (1: one process, or --gpus 1)
  bool shard_optimizer = false;  // ZeRO-1; else every rank updates everything
  bool enabled = false;          // collectives run (--gpus, or a launcher's environment)
  // SMs the GEMMs (16-bit and FP8) issued while a gradient exchange runs
  // beside them leave to it (DeviceServices::gemms_beside_exchange):
  // cuBLASLt's grid is sized to the others
  // (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET). 0: every SM. The front end sets
  // it with the rest (gemm_sm_margin_for).
  int gemm_sm_margin = 0;

  // What every bucket is padded to a multiple of: 1 for one rank (the plain
  // layout), else world * 64 elements, so each shard is 256-byte aligned in
  // fp32 as the vectorised kernels and NCCL like it.
  std::int64_t span_align() const { return world > 1 ? 64LL * world : 1; }
  // Elements of each AdamW moment block a rank holds, for a layout of
  // `total` elements (a multiple of span_align()).
  std::int64_t moment_elements(std::int64_t total) const {
    return shard_optimizer ? total / world : total;
  }
  // One line: "2 ranks, ZeRO-1 (AdamW state sharded)", "off".
  std::string describe() const;
};

// The SMs the GEMMs beside the exchange of `dp` leave to it:
// none on one rank; on several, `requested` where one is given (>= 0:
// TINYLLAMA_GEMM_SM_MARGIN), else 27: the 9 thread blocks of NCCL 2.28's
// symmetric reduce-scatter on Hopper (its cost model's fewest within 2.5 %
// of peak; model/collectives.h puts the gradients in its window) and 18
// for the AdamW sweep that follows each exchange on its stream.
int gemm_sm_margin_for(const DataParallel& dp, long requested = -1);

// A rank's part of one bucket.
struct BucketShard {
  ParamSpan state;                // into the weights, gradients and compute copy
  std::int64_t moment_begin = 0;  // into the moment blocks (moment_elements long)
};

// Rank `rank`'s shard of `bucket` (the whole bucket unless the optimizer is
// sharded). Throws std::invalid_argument when the bucket is not a multiple
// of the ranks.
BucketShard shard_of(ParamSpan bucket, const DataParallel& dp, int rank);

// Copies every slot's stored elements (elem bytes each) from a block laid
// out by `from` into one laid out by `to` (same model, other padding);
// dst's padding is left as it was. Where the two reserve different rows for
// a slot (VocabRows), only the rows both reserve are copied: a padded
// embedding's extra rows are dropped, or left as they were in dst.
void copy_slots(const ParamLayout& from, const void* src, const ParamLayout& to, void* dst,
                std::size_t elem);

}  // namespace tinyllama
