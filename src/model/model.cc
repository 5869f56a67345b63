#include "model/model.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/errors.h"
#include "core/op_marker.h"

namespace tinyllama {
namespace {

// A slot's view widened to every row it reserves (ParamSlot::stored_rows).
Mat with_stored_rows(Mat m, const ParamSlot& s) {
  return Mat(m.data, m.dtype, s.stored_rows, s.cols);
}

// Host-side conversion between the exchange format (double) and the master
// dtype, which is fp32 for training and fp64 for gradient checks.
std::vector<char> pack(const std::vector<double>& host, DType dtype) {
  std::vector<char> raw(host.size() * dtype_size(dtype));
  if (dtype == DType::F64) {
    std::memcpy(raw.data(), host.data(), raw.size());
  } else if (dtype == DType::F32) {
    auto* out = reinterpret_cast<float*>(raw.data());
    for (std::size_t i = 0; i < host.size(); ++i) out[i] = static_cast<float>(host[i]);
  } else {
    throw std::invalid_argument("master weights must be float32 or float64");
  }
  return raw;
}

std::vector<double> unpack(const char* raw, std::size_t bytes, DType dtype) {
  std::vector<double> host(bytes / dtype_size(dtype));
  if (dtype == DType::F64) {
    std::memcpy(host.data(), raw, bytes);
  } else {
    const auto* in = reinterpret_cast<const float*>(raw);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = in[i];
  }
  return host;
}

}  // namespace

Model::Model(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan, Backend& backend,
             Collectives* collectives)
    : cfg_(cfg),
      plan_(plan),
      shape_(shape),
      backend_(backend),
      comm_(plan.parallel.enabled ? collectives : nullptr),
      layout_(cfg, plan.parallel.span_align()),
      grad_layout_(layout_, plan.ops.grad_buffers),
      compute_copy_(layout_, plan),
      canonical_(cfg, 1, VocabRows::Exact),
      non_layer_spans_(layout_.non_layer_spans()),
      acts_(cfg, shape, plan) {
  cfg_.validate();
  if (plan_.parallel.enabled &&
      (collectives == nullptr || collectives->world() != plan_.parallel.world)) {
    throw std::logic_error("Model: a data-parallel plan needs the collectives of its ranks");
  }
  if (plan_.parallel.shard_optimizer && plan_.ops.optimizer == OptimizerImpl::PerTensor) {
    // The per-tensor updates index whole moment blocks; shards cut tensors.
    throw std::logic_error("Model: ZeRO-1 needs a fused optimizer sweep (not per-tensor)");
  }
  if (plan_.grad_ring() && plan_.parallel.enabled) {
    // The all-reduce runs over each layer's span of the flat gradient block.
    throw std::logic_error("Model: grad_buffers ring needs a single-process run (resolve_run)");
  }
  backend_.prepare(cfg_, shape_, plan_);
  const std::size_t elem = dtype_size(plan_.precision.master);
  const auto master_bytes = static_cast<std::size_t>(layout_.total()) * elem;
  const auto grad_bytes = static_cast<std::size_t>(grad_layout_.total()) * elem;
  const auto moment_bytes =
      static_cast<std::size_t>(plan_.parallel.moment_elements(layout_.total())) * elem;
  const std::size_t state_bytes = master_bytes + grad_bytes + 2 * moment_bytes;
  // The ranks reduce-scatter the gradients in place and gather the fp32
  // masters (without AMP): in the collectives' own memory where they offer it.
  state_ = allocate_exchanged(state_bytes, state_in_window_);
  auto* base = static_cast<char*>(state_);
  params_ = base;
  grads_ = base + master_bytes;
  adam_m_ = base + master_bytes + grad_bytes;
  adam_v_ = base + master_bytes + grad_bytes + moment_bytes;
  // Padding between parameter slots must stay zero in all four blocks, so
  // that the optimizer can sweep whole blocks.
  backend_.fill_zero(state_, state_bytes);
  if (plan_.precision.mixed()) {
    // The ranks all-gather the compute copy: in the collectives' own memory
    // where they offer it.
    const auto bytes =
        static_cast<std::size_t>(compute_copy_.total()) * dtype_size(plan_.precision.compute);
    compute_params_ = allocate_exchanged(bytes, compute_params_in_window_);
  }
  arena_ = backend_.allocate(static_cast<std::size_t>(acts_.bytes));
  // FP8 scalar blocks start at zero: delayed scaling's history is read
  // whole, so no byte of it may be left to chance (checkpoints hold it).
  if (acts_.fp8.used()) {
    for (const Fp8ScalarBlocks& b : acts_.fp8.scalar_blocks(arena_)) {
      backend_.fill_zero(b.blocks, static_cast<std::size_t>(b.count) * kFp8Block * sizeof(float));
    }
  }
  // Inputs and targets in one block per micro-batch: a step's batch is one copy.
  const auto micro = static_cast<std::size_t>(micro_batches());
  const auto token_bytes = static_cast<std::size_t>(shape_.tokens()) * sizeof(std::int32_t);
  token_blocks_ = static_cast<std::int32_t*>(backend_.allocate(2 * token_bytes * micro));
  select_micro_batch(0);
  if (plan_.update.accumulates()) {
    const Mat losses = acts_.view(arena_, acts_.losses);
    step_losses_ = backend_.allocate(static_cast<std::size_t>(losses.numel()) * micro *
                                     dtype_size(losses.dtype));
    grad_accum_ = backend_.allocate(grad_bytes);
  }
  if (plan_.update.needs_norm()) {
    norm_acc_ =
        static_cast<double*>(backend_.allocate((1 + Backend::kSumSquaresScratch) * sizeof(double)));
    grad_norm_ = static_cast<float*>(backend_.allocate(sizeof(float)));
    backend_.fill_zero(grad_norm_, sizeof(float));
  }
  overflow_flag_ = static_cast<std::int32_t*>(backend_.allocate(sizeof(std::int32_t)));
  backend_.fill_zero(overflow_flag_, sizeof(std::int32_t));
  stop_vote_ = static_cast<std::int32_t*>(backend_.allocate(sizeof(std::int32_t)));
  backend_.fill_zero(stop_vote_, sizeof(std::int32_t));
  step_scalars_ = static_cast<StepScalars*>(backend_.allocate(sizeof(StepScalars)));
  if (reduces_fp8_amaxes()) {
    fp8_amaxes_ =
        static_cast<float*>(backend_.allocate(fp8_scaling_floats() / kFp8Block * sizeof(float)));
  }
  const StepScalars initial = make_step_scalars(hyper_, loss_scale_, shape_.tokens());
  backend_.upload(step_scalars_, &initial, sizeof initial);
}

Model::~Model() {
  release_exchanged(state_, state_in_window_);
  release_exchanged(compute_params_, compute_params_in_window_);
  for (void* p : {arena_, static_cast<void*>(token_blocks_), static_cast<void*>(overflow_flag_),
                  static_cast<void*>(stop_vote_), static_cast<void*>(step_scalars_), step_losses_,
                  grad_accum_, static_cast<void*>(norm_acc_), static_cast<void*>(grad_norm_),
                  static_cast<void*>(fp8_amaxes_)}) {
    if (p != nullptr) backend_.release(p);
  }
}

void* Model::allocate_exchanged(std::size_t bytes, bool& in_window) {
  void* window = comm_ != nullptr ? comm_->allocate_window(bytes) : nullptr;
  in_window = window != nullptr;
  return in_window ? window : backend_.allocate(bytes);
}

void Model::release_exchanged(void* block, bool in_window) {
  if (block == nullptr) return;
  if (in_window) {
    comm_->release_window(block);
  } else {
    backend_.release(block);
  }
}

int Model::summed_ranks() const {
  return comm_ != nullptr ? comm_->world() : 1;
}

MemoryBreakdown Model::estimate_memory(const ModelConfig& cfg, BatchShape shape,
                                       const StepPlan& plan) {
  const ParamLayout layout(cfg, plan.parallel.span_align());
  const ActivationPlan acts(cfg, shape, plan);
  const Precision precision = plan.precision;
  const auto elem = static_cast<std::int64_t>(dtype_size(precision.master));
  const std::int64_t master = layout.total() * elem;
  MemoryBreakdown m;
  m.parameters = master;
  if (precision.mixed()) {
    m.parameters += ComputeCopyLayout(layout, plan).total() *
                    static_cast<std::int64_t>(dtype_size(precision.compute));
  }
  const std::int64_t micro = plan.update.accumulation;
  m.gradients = GradLayout(layout, plan.ops.grad_buffers).total() * elem;
  if (plan.update.accumulates()) m.gradients *= 2;  // and their accumulator
  if (plan.update.needs_norm()) {
    m.gradients += (1 + Backend::kSumSquaresScratch) * static_cast<std::int64_t>(sizeof(double)) +
                   static_cast<std::int64_t>(sizeof(float));
  }
  m.optimizer = 2 * plan.parallel.moment_elements(layout.total()) * elem;
  m.activations =
      acts.bytes + 2 * shape.tokens() * micro * static_cast<std::int64_t>(sizeof(std::int32_t));
  if (plan.update.accumulates()) {
    m.activations +=
        shape.tokens() * micro * static_cast<std::int64_t>(dtype_size(precision.stats()));
  }
  m.workspaces = plan.workspace_bytes();
  return m;
}

MemoryBreakdown Model::memory() const {
  return estimate_memory(cfg_, shape_, plan_);
}

Mat Model::param(const ParamSlot& s) const {
  auto* base = static_cast<char*>(params_) +
               s.offset * static_cast<std::int64_t>(dtype_size(plan_.precision.master));
  return Mat(base, plan_.precision.master, s.rows, s.cols);
}

Mat Model::grad(const ParamSlot& s) const {
  auto* base =
      static_cast<char*>(grads_) +
      grad_layout_.offset(s.offset) * static_cast<std::int64_t>(dtype_size(plan_.precision.master));
  return Mat(base, plan_.precision.master, s.rows, s.cols);
}

Mat Model::compute_weight(const ParamSlot& s) const {
  if (!plan_.precision.mixed() || !compute_copy_.keeps(s.offset)) return param(s);
  auto* base = static_cast<char*>(compute_params_) +
               compute_copy_.offset(s.offset) *
                   static_cast<std::int64_t>(dtype_size(plan_.precision.compute));
  return Mat(base, plan_.precision.compute, s.rows, s.cols);
}

Mat Model::lm_head_weight() const {
  return with_stored_rows(compute_weight(layout_.embedding()), layout_.embedding());
}

Mat Model::lm_head_grad() const {
  return with_stored_rows(grad(layout_.embedding()), layout_.embedding());
}

void Model::refresh_compute_weights() {
  if (!plan_.precision.mixed()) return;
  const OpScope op("refresh_weights");
  const Precision p = plan_.precision;
  for (const SlotRun& run : compute_copy_.runs({0, layout_.total()})) {
    if (run.group == 0) continue;  // no copy
    const std::int64_t n = run.span.size();
    backend_.convert(Mat::flat(compute_params_, p.compute, compute_copy_.offset(run.span.begin), n),
                     Mat::flat(params_, p.master, run.span.begin, n));
  }
}

void Model::set_params(const std::vector<double>& host) {
  if (static_cast<std::int64_t>(host.size()) != layout_.total()) {
    throw std::invalid_argument("set_params: expected " + std::to_string(layout_.total()) +
                                " values");
  }
  const auto raw = pack(host, plan_.precision.master);
  backend_.upload(params_, raw.data(), raw.size());
  refresh_compute_weights();
}

std::vector<double> Model::params() const {
  const std::vector<char> raw = full_block(StateBlock::Params);
  return unpack(raw.data(), raw.size(), plan_.precision.master);
}

std::vector<double> Model::grads() const {
  if (plan_.grad_ring()) {
    throw std::logic_error(
        "Model::grads: grad_buffers ring keeps only two layers' gradients (a plan for a reader of "
        "the whole gradient falls back to full: PlanRequest::whole_gradient_reader)");
  }
  std::vector<char> raw(static_cast<std::size_t>(layout_.total()) *
                        dtype_size(plan_.precision.master));
  backend_.download(raw.data(), grads_, raw.size());
  std::vector<double> g = unpack(raw.data(), raw.size(), plan_.precision.master);
  // The ranks' sum (exchange_gradients) as the global batch's gradient.
  const double ranks = summed_ranks();
  if (ranks != 1) {
    for (double& v : g) v /= ranks;
  }
  return g;
}

std::vector<double> Model::adam_m() const {
  const std::vector<char> raw = full_block(StateBlock::AdamM);
  return unpack(raw.data(), raw.size(), plan_.precision.master);
}

std::vector<double> Model::adam_v() const {
  const std::vector<char> raw = full_block(StateBlock::AdamV);
  return unpack(raw.data(), raw.size(), plan_.precision.master);
}

std::vector<std::uint8_t> Model::state_bytes(StateBlock block) const {
  const std::vector<char> raw = full_block(block);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(canonical_.total()) *
                                dtype_size(plan_.precision.master));
  copy_slots(layout_, raw.data(), canonical_, out.data(), dtype_size(plan_.precision.master));
  return out;
}

void Model::set_state_bytes(StateBlock block, const std::vector<std::uint8_t>& bytes) {
  const std::size_t elem = dtype_size(plan_.precision.master);
  if (bytes.size() != static_cast<std::size_t>(canonical_.total()) * elem) {
    throw std::invalid_argument("set_state_bytes: wrong size");
  }
  std::vector<char> raw(static_cast<std::size_t>(layout_.total()) * elem, 0);
  copy_slots(canonical_, bytes.data(), layout_, raw.data(), elem);
  if (block == StateBlock::Params) {
    backend_.upload(params_, raw.data(), raw.size());
    master_stale_ = false;
    refresh_compute_weights();
    return;
  }
  // This rank's shard of each bucket (everything without ZeRO-1).
  void* moments = block == StateBlock::AdamM ? adam_m_ : adam_v_;
  const int rank = comm_ != nullptr ? comm_->rank() : 0;
  for (const ParamSpan& bucket : layout_.spans()) {
    const BucketShard shard = shard_of(bucket, plan_.parallel, rank);
    backend_.upload(static_cast<char*>(moments) + shard.moment_begin * elem,
                    raw.data() + shard.state.begin * elem,
                    static_cast<std::size_t>(shard.state.size()) * elem);
  }
}

void Model::set_batch(const std::vector<std::int32_t>& rows) {
  const std::int64_t s = shape_.seq;
  const std::int64_t micro_rows = shape_.batch * (s + 1);
  const auto given = static_cast<std::int64_t>(rows.size());
  if (given != micro_rows && given != micro_rows * micro_batches()) {
    throw std::invalid_argument(
        "set_batch: expected batch * (seq + 1) tokens, or that times the micro-batches");
  }
  // Per micro-batch [inputs | targets], as the block tokens_ and targets_
  // share holds them.
  const std::int64_t n = shape_.tokens();
  const std::int64_t blocks = given / micro_rows;
  std::vector<std::int32_t> both(static_cast<std::size_t>(2 * n * blocks));
  for (std::int64_t k = 0; k < blocks; ++k) {
    const std::int32_t* in = rows.data() + k * micro_rows;
    std::int32_t* out = both.data() + 2 * n * k;
    for (std::int64_t b = 0; b < shape_.batch; ++b) {
      for (std::int64_t t = 0; t < s; ++t) {
        out[b * s + t] = in[b * (s + 1) + t];
        out[n + b * s + t] = in[b * (s + 1) + t + 1];
      }
    }
  }
  backend_.upload_async(token_blocks_, both.data(), both.size() * sizeof(std::int32_t));
  select_micro_batch(0);
}

void Model::select_micro_batch(int micro) {
  if (micro < 0 || micro >= micro_batches()) {
    throw std::invalid_argument("select_micro_batch: " + std::to_string(micro) + " of " +
                                std::to_string(micro_batches()));
  }
  micro_ = micro;
  tokens_ = token_blocks_ + 2 * shape_.tokens() * micro;
  targets_ = tokens_ + shape_.tokens();
}

Mat Model::micro_losses() const {
  const Mat losses = acts_.view(arena_, acts_.losses);
  if (step_losses_ == nullptr) return losses;
  return step_losses().row_block(losses.rows * micro_, losses.rows);
}

Mat Model::step_losses() const {
  const Mat losses = acts_.view(arena_, acts_.losses);
  if (step_losses_ == nullptr) return losses;
  return Mat(step_losses_, losses.dtype, losses.rows * micro_batches(), losses.cols);
}

void Model::stage_step(float loss_scale, bool check_overflow, const AdamWHyper& hp) {
  loss_scale_ = loss_scale;
  check_overflow_ = check_overflow;
  hyper_ = hp;
  hyper_.scalars = nullptr;  // the model points the optimizer at its own copy
  // Only a scanned (fp16) step divides its loss scale out in the update.
  AdamWHyper effective = hyper_;
  if (check_overflow) effective.grad_scale = loss_scale;
  // Data parallel: the exchange summed the ranks' mean gradients.
  effective.grad_scale *= static_cast<float>(summed_ranks());
  // The mean loss of the whole step: every micro-batch's positions.
  const StepScalars s = make_step_scalars(effective, loss_scale, shape_.tokens() * micro_batches());
  backend_.upload_async(step_scalars_, &s, sizeof s);
  // Under ZeRO-1 with a compute copy a step updates this rank's shard of the
  // fp32 masters and gathers only the copy (update_bucket): the other
  // shards of params_ go stale until full_block gathers them. Noted here,
  // for every step, because a graph replay runs none of the host code that
  // enqueued the update.
  if (comm_ != nullptr && comm_->world() > 1 && plan_.parallel.shard_optimizer &&
      plan_.precision.mixed()) {
    master_stale_ = true;
  }
}

double Model::loss() const {
  const Mat losses = micro_losses();
  std::vector<char> raw(static_cast<std::size_t>(losses.numel()) * dtype_size(losses.dtype));
  backend_.download(raw.data(), losses.data, raw.size());
  return mean_of_losses(raw.data(), raw.size());
}

std::size_t Model::losses_bytes() const {
  const Mat losses = step_losses();
  return static_cast<std::size_t>(losses.numel()) * dtype_size(losses.dtype);
}

void Model::enqueue_loss_readback(HostReadback& rb) const {
  rb.copy_from(step_losses().data, losses_bytes());
}

double Model::mean_loss(HostReadback& rb) const {
  return mean_of_losses(rb.wait(), losses_bytes());
}

void Model::enqueue_grad_norm_readback(HostReadback& rb) const {
  if (grad_norm_ == nullptr) throw std::logic_error("Model: this plan computes no gradient norm");
  rb.copy_from(grad_norm_, sizeof(float));
}

double Model::grad_norm(HostReadback& rb) {
  float norm = 0;
  std::memcpy(&norm, rb.wait(), sizeof norm);
  return norm;
}

double Model::mean_of_losses(const void* raw, std::size_t bytes) const {
  const std::vector<double> values =
      unpack(static_cast<const char*>(raw), bytes, acts_.view(arena_, acts_.losses).dtype);
  double sum = 0;
  for (double v : values) sum += v;
  // Data parallel: the losses were summed over the ranks (reduce_losses),
  // whose shares of the batch are equal, so this is the global batch's mean.
  return sum / static_cast<double>(values.size()) / summed_ranks();
}

bool Model::overflowed() const {
  if (!check_overflow_) return false;
  std::int32_t flag = 0;
  backend_.download(&flag, overflow_flag_, sizeof flag);
  return flag != 0;
}

}  // namespace tinyllama
