// The data-parallel parts of a step (model/data_parallel.h): the gradient
// exchange per bucket, the sharded update and weight gather, the combined
// overflow flag and losses, and reading state that lives in shards.
#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/errors.h"
#include "core/op_marker.h"
#include "model/model.h"

namespace tinyllama {
namespace {

void* at(void* block, std::int64_t elements, DType t) {
  return static_cast<char*>(block) + elements * static_cast<std::int64_t>(dtype_size(t));
}

}  // namespace

std::int64_t Model::sweep_shard(const BucketShard& shard, const AdamWHyper& hp,
                                bool beside_backward) {
  // One sweep per run of slots that share a decay group (the norm weights
  // skip the decay under decay_matrices_only) and whether they keep a
  // compute copy (ComputeCopyLayout). Tickets grow, so the last one joins
  // them all.
  const bool split_decay = plan_.update.decay_matrices_only;
  const std::vector<ParamSlot>& slots = layout_.slots();
  std::int64_t ticket = -1;
  for (const SlotRun& run : slot_runs(layout_, shard.state, [&](std::size_t i) {
         const bool decay = !split_decay || !slots[i].is_norm;
         return (decay ? 2 : 0) + (compute_copy_.keeps(slots[i].offset) ? 1 : 0);
       })) {
    AdamWHyper group = hp;
    group.apply_decay = hp.apply_decay && (run.group & 2) != 0;
    const BucketShard part{run.span, shard.moment_begin + (run.span.begin - shard.state.begin)};
    ticket = sweep_groups(part, group, beside_backward, (run.group & 1) != 0);
  }
  return ticket;
}

std::int64_t Model::sweep_groups(const BucketShard& shard, const AdamWHyper& hp,
                                 bool beside_backward, bool with_copy) {
  const DType m = plan_.precision.master;
  const std::int64_t n = shard.state.size();
  const Mat param = Mat::flat(params_, m, shard.state.begin, n);
  const Mat grad = Mat::flat(grads_, m, grad_layout_.offset(shard.state.begin), n);
  const Mat mom1 = Mat::flat(adam_m_, m, shard.moment_begin, n);
  const Mat mom2 = Mat::flat(adam_v_, m, shard.moment_begin, n);
  const Mat copy = plan_.precision.mixed() && with_copy
                       ? Mat::flat(compute_params_, plan_.precision.compute,
                                   compute_copy_.offset(shard.state.begin), n)
                       : Mat();
  if (beside_backward) return backend_.side_adamw_fused(param, grad, mom1, mom2, copy, hp);
  backend_.adamw_fused(param, grad, mom1, mom2, copy, hp);
  return -1;
}

void Model::exchange_gradients(ParamSpan bucket) {
  const DType m = plan_.precision.master;
  void* stream = backend_.begin_side_collective();
  if (plan_.parallel.shard_optimizer) {
    comm_->reduce_scatter(at(grads_, bucket.begin, m), bucket.size() / comm_->world(), m,
                          ReduceOp::Sum, stream);
  } else {
    comm_->all_reduce(at(grads_, bucket.begin, m), bucket.size(), m, ReduceOp::Sum, stream);
  }
  backend_.end_side_collective();
  backend_.gemms_beside_exchange();
}

void Model::update_bucket(ParamSpan bucket, const AdamWHyper& hp) {
  const BucketShard shard = shard_of(bucket, plan_.parallel, comm_->rank());
  sweep_shard(shard, hp, /*beside_backward=*/true);
  if (!plan_.parallel.shard_optimizer) return;  // every rank updated all of it
  OpSequence ops;
  ops.next("weight_gather");
  const Precision p = plan_.precision;
  void* stream = backend_.begin_side_collective();
  if (p.mixed()) {
    // The forward pass reads only the compute copy: gathering it moves half
    // the bytes of the fp32 masters, which stay fresh in this rank's shards.
    // (The other ranks' master shards are stale from here: stage_step notes it.)
    comm_->all_gather(at(compute_params_, compute_copy_.offset(bucket.begin), p.compute),
                      shard.state.size(), p.compute, stream);
  } else {
    comm_->all_gather(at(params_, bucket.begin, p.master), shard.state.size(), p.master, stream);
  }
  backend_.end_side_collective();
}

void Model::parallel_optimizer_pass(const AdamWHyper& hp) {
  // The layers were updated in the backward pass unless the step was
  // checked for overflow (fp16) or the plan updates everything at the end.
  const bool layers_done = std::exchange(layers_updated_, false);
  for (const ParamSpan& bucket : layers_done ? non_layer_spans_ : layout_.spans()) {
    update_bucket(bucket, hp);
  }
  backend_.join_side_updates();  // the step ends with every update and gather done
}

void Model::for_each_grad_shard(const std::function<void(Mat)>& fn) const {
  const DType m = plan_.precision.master;
  for (const ParamSpan& bucket : layout_.spans()) {
    const BucketShard shard = shard_of(bucket, plan_.parallel, comm_->rank());
    fn(Mat::flat(grads_, m, shard.state.begin, shard.state.size()));
  }
}

void Model::parallel_overflow_check() {
  backend_.join_side_updates();  // every bucket's exchange
  backend_.fill_zero(overflow_flag_, sizeof(std::int32_t));
  for_each_grad_shard([&](Mat shard) { backend_.flag_nonfinite(shard, overflow_flag_); });
  // Each rank scanned its own shards: one overflow anywhere skips everywhere.
  comm_->all_reduce_max(overflow_flag_, backend_.main_stream_handle());
}

void Model::reduce_losses(bool beside_backward) {
  const OpScope op("loss_reduce");
  // A training step's (every micro-batch's), or the evaluated batch's.
  const Mat losses = beside_backward ? step_losses() : micro_losses();
  void* stream = beside_backward ? backend_.begin_side_collective() : backend_.main_stream_handle();
  comm_->all_reduce(losses.data, losses.numel(), losses.dtype, ReduceOp::Sum, stream);
  // A training step also combines the ranks' stop votes (stage_stop_vote).
  if (beside_backward) comm_->all_reduce_max(stop_vote_, stream);
  if (beside_backward) backend_.end_side_collective();
}

void Model::adopt_rank0_tuning() {
  if (comm_ == nullptr || comm_->world() == 1) return;
  backend_.synchronize();  // nothing of this rank's steps still runs
  const std::string rank0 = comm_->text_from_rank0(backend_.tuning_state());
  if (comm_->rank() != 0 && !rank0.empty()) {
    const std::string why = backend_.restore_tuning_state(rank0);
    if (!why.empty()) throw RuntimeFailure("rank " + std::to_string(comm_->rank()) + ": " + why);
  }
}

void Model::stage_stop_vote(bool stop) {
  const std::int32_t vote = stop ? 1 : 0;
  backend_.upload_async(stop_vote_, &vote, sizeof vote);
}

void Model::enqueue_stop_readback(HostReadback& rb) const {
  rb.copy_from(stop_vote_, sizeof(std::int32_t));
}

bool Model::stop_voted(HostReadback& rb) {
  std::int32_t vote = 0;
  std::memcpy(&vote, rb.wait(), sizeof vote);
  return vote != 0;
}

void Model::gather_into_grads(const void* shards) const {
  const DType m = plan_.precision.master;
  void* stream = backend_.main_stream_handle();
  for (const ParamSpan& bucket : layout_.spans()) {
    const BucketShard shard = shard_of(bucket, plan_.parallel, comm_->rank());
    const std::int64_t n = shard.state.size();
    backend_.convert(Mat::flat(grads_, m, shard.state.begin, n),
                     Mat::flat(const_cast<void*>(shards), m, shard.moment_begin, n));
    comm_->all_gather(at(grads_, bucket.begin, m), n, m, stream);
  }
}

std::vector<char> Model::full_block(StateBlock block) const {
  const DType m = plan_.precision.master;
  const std::size_t bytes = static_cast<std::size_t>(layout_.total()) * dtype_size(m);
  std::vector<char> raw(bytes);
  if (block == StateBlock::Params) {
    if (master_stale_) {
      for (const ParamSpan& bucket : layout_.spans()) {
        const BucketShard shard = shard_of(bucket, plan_.parallel, comm_->rank());
        comm_->all_gather(at(params_, bucket.begin, m), shard.state.size(), m,
                          backend_.main_stream_handle());
      }
      master_stale_ = false;
    }
    backend_.download(raw.data(), params_, bytes);
    return raw;
  }
  void* moments = block == StateBlock::AdamM ? adam_m_ : adam_v_;
  if (comm_ == nullptr || !plan_.parallel.shard_optimizer) {
    backend_.download(raw.data(), moments, bytes);
    return raw;
  }
  // The gradients are dead between steps (the next backward overwrites
  // them): the moments are gathered there, and the block zeroed again, as
  // its padding must be.
  gather_into_grads(moments);
  backend_.download(raw.data(), grads_, bytes);
  backend_.fill_zero(grads_, bytes);
  return raw;
}

}  // namespace tinyllama
