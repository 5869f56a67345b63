// Data-parallel training on the CPU: the bucket and shard arithmetic, and
// whole steps of N ranks (threads, each with its own backend and model,
// joined by ThreadCollectives) against one model trained on the global
// batch -- with the optimizer sharded (ZeRO-1) and with gradients
// all-reduced, at 2 and 3 ranks, in float64 so that only summation order
// separates them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/data_parallel.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "thread_collectives.h"

namespace tinyllama {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.hidden_dim = 12;
  c.num_layers = 3;
  c.num_heads = 3;
  c.num_kv_heads = 1;
  c.ffn_dim = 14;
  return c;
}

TEST(DataParallelLayout, SpansAreAlignedContiguousAndHoldTheSameValues) {
  const ModelConfig cfg = small_config();
  const ParamLayout plain(cfg);
  for (int world : {2, 3, 4}) {
    DataParallel dp{world, true, true};
    const ParamLayout padded(cfg, dp.span_align());
    const std::vector<ParamSpan> spans = padded.spans();
    ASSERT_EQ(spans.size(), static_cast<std::size_t>(cfg.num_layers) + 2);
    std::int64_t at = 0;
    for (const ParamSpan& s : spans) {
      EXPECT_EQ(s.begin, at);
      EXPECT_EQ(s.begin % dp.span_align(), 0);
      EXPECT_EQ(s.size() % dp.span_align(), 0);
      at = s.end;
    }
    EXPECT_EQ(at, padded.total());
    for (int l = 0; l < cfg.num_layers; ++l) {
      const ParamSpan s = padded.layer_span(l);
      for (int LayerSlots::*which : {&LayerSlots::attn_norm, &LayerSlots::wqkv, &LayerSlots::wo,
                                     &LayerSlots::ffn_norm, &LayerSlots::wgu, &LayerSlots::wdown}) {
        const ParamSlot& slot = padded.layer(l, which);
        EXPECT_GE(slot.offset, s.begin);
        EXPECT_LE(slot.offset + slot.stored_numel(), s.end);
      }
    }
    // The same weights whatever the padding, and a lossless round trip.
    const std::vector<double> a = initial_weights(plain, 5);
    const std::vector<double> b = initial_weights(padded, 5);
    std::vector<double> back(a.size(), -1.0);
    copy_slots(padded, b.data(), plain, back.data(), sizeof(double));
    for (std::size_t i = 0; i < a.size(); ++i) {
      // Padding of the plain layout is left as it was (-1) by copy_slots.
      if (back[i] != -1.0) {
        EXPECT_EQ(back[i], a[i]) << i;
      }
    }
    for (const ParamSlot& s : plain.slots()) {
      for (std::int64_t i = 0; i < s.stored_numel(); ++i)
        EXPECT_EQ(back[s.offset + i], a[s.offset + i]);
    }
  }
}

TEST(DataParallelLayout, OneRankKeepsThePlainLayout) {
  const ModelConfig cfg = small_config();
  const DataParallel one{1, true, true};
  const ParamLayout a(cfg), b(cfg, one.span_align());
  EXPECT_EQ(a.total(), b.total());
  for (std::size_t i = 0; i < a.slots().size(); ++i)
    EXPECT_EQ(a.slots()[i].offset, b.slots()[i].offset);
}

// The GEMMs beside the exchange leave it 27 SMs on several ranks and
// none on one (nothing to exchange, whatever is asked); a requested margin
// (TINYLLAMA_GEMM_SM_MARGIN) is taken as it is on several, 0 included.
TEST(DataParallelShards, TheGemmsLeaveTheExchangeItsSmsOnSeveralRanksOnly) {
  DataParallel dp;
  EXPECT_EQ(gemm_sm_margin_for(dp), 0) << "one process";
  dp.enabled = true;
  EXPECT_EQ(gemm_sm_margin_for(dp), 0) << "--gpus 1";
  dp.world = 2;
  EXPECT_EQ(gemm_sm_margin_for(dp), 27);
  dp.world = 4;
  dp.shard_optimizer = true;
  EXPECT_EQ(gemm_sm_margin_for(dp), 27);
  EXPECT_EQ(gemm_sm_margin_for(dp, 0), 0);
  EXPECT_EQ(gemm_sm_margin_for(dp, 18), 18);
  EXPECT_EQ(gemm_sm_margin_for(DataParallel{}, 5), 0) << "a margin asked for on one GPU";
}

TEST(DataParallelShards, CoverEachBucketOnceAndPackTheMoments) {
  const ModelConfig cfg = small_config();
  for (int world : {1, 2, 3, 5}) {
    const DataParallel dp{world, true, true};
    const ParamLayout layout(cfg, dp.span_align());
    for (int rank = 0; rank < world; ++rank) {
      std::int64_t moments = 0;
      for (const ParamSpan& bucket : layout.spans()) {
        const BucketShard s = shard_of(bucket, dp, rank);
        EXPECT_EQ(s.state.size() * world, bucket.size());
        EXPECT_EQ(s.state.begin, bucket.begin + rank * s.state.size());
        EXPECT_EQ(s.moment_begin, moments);  // back to back, in bucket order
        moments += s.state.size();
      }
      EXPECT_EQ(moments, dp.moment_elements(layout.total()));
    }
  }
  const DataParallel two{2, true, true};
  EXPECT_THROW(shard_of({0, 3}, two, 0), std::invalid_argument);
  EXPECT_THROW(shard_of({0, 4}, two, 2), std::invalid_argument);
  const DataParallel unsharded{2, false, true};
  const BucketShard whole = shard_of({6, 10}, unsharded, 1);
  EXPECT_EQ(whole.state.begin, 6);
  EXPECT_EQ(whole.state.end, 10);
  EXPECT_EQ(whole.moment_begin, 6);
}

std::vector<std::int32_t> random_rows(int batch, int seq, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(batch) * (seq + 1));
  for (auto& t : rows) t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return rows;
}

struct RunResult {
  std::vector<double> losses;
  std::vector<std::uint8_t> params, m, v;  // canonical layout (state_bytes)
  std::vector<double> first_grads;         // Model::grads() after step 1's backward pass
};

constexpr int kSteps = 3;
constexpr int kSeq = 7;

AdamWHyper test_hyper() {
  AdamWHyper hp;
  hp.lr = 1e-2f;
  return hp;
}

// A block in the model's layout (its ranks' padding) in the canonical one.
std::vector<double> canonical(const Model& model, const std::vector<double>& block) {
  std::vector<double> out(static_cast<std::size_t>(model.state_layout().total()), 0.0);
  copy_slots(model.layout(), block.data(), model.state_layout(), out.data(), sizeof(double));
  return out;
}

// One model's steps on its rows of each global batch.
RunResult run_rank(const std::string& level, BatchShape shape, const DataParallel& dp,
                   Collectives* comm, const std::vector<std::vector<std::int32_t>>& batches) {
  const ModelConfig cfg = small_config();
  CpuBackend backend;
  StepPlan plan = graph_plan(level_preset(level), Precision::fp64(), cfg, shape);
  plan.parallel = dp;
  Model model(cfg, shape, plan, backend, comm);
  model.set_params(initial_weights(model.layout(), 3));
  RunResult out;
  AdamWHyper hp = test_hyper();
  const int rank = comm != nullptr ? comm->rank() : 0;
  const std::size_t row = kSeq + 1;
  for (int step = 0; step < kSteps; ++step) {
    const auto& global = batches[static_cast<std::size_t>(step)];
    const auto first = global.begin() + static_cast<std::ptrdiff_t>(rank * shape.batch * row);
    model.set_batch(
        std::vector<std::int32_t>(first, first + static_cast<std::ptrdiff_t>(shape.batch * row)));
    hp.step = step + 1;
    model.stage_step(1.0f, false, hp);
    model.forward_pass();
    model.backward_pass(/*update_layers=*/true);
    if (step == 0) out.first_grads = canonical(model, model.grads());
    model.optimizer_pass();
    out.losses.push_back(model.loss());
  }
  out.params = model.state_bytes(Model::StateBlock::Params);
  out.m = model.state_bytes(Model::StateBlock::AdamM);
  out.v = model.state_bytes(Model::StateBlock::AdamV);
  return out;
}

std::vector<std::uint8_t> to_bytes(const std::vector<double>& values) {
  std::vector<std::uint8_t> out(values.size() * sizeof(double));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Element-wise, relative to the block's largest magnitude (AdamW's moments
// and weights near zero would make a plain relative error meaningless).
void expect_close(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b,
                  double tolerance, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  std::vector<double> x(a.size() / 8), y(b.size() / 8);
  std::memcpy(x.data(), a.data(), a.size());
  std::memcpy(y.data(), b.data(), b.size());
  double largest = 0;
  for (double v : y) largest = std::max(largest, std::abs(v));
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double e = std::abs(x[i] - y[i]) / largest;
    if (e > worst) {
      worst = e;
      at = i;
    }
  }
  EXPECT_LE(worst, tolerance) << what << " at " << at << ": " << x[at] << " vs " << y[at];
}

void check_against_one_model(const std::string& level, int world, bool shard) {
  const int local_batch = 2;
  std::vector<std::vector<std::int32_t>> batches;
  batches.reserve(kSteps);
  for (int s = 0; s < kSteps; ++s) {
    batches.push_back(random_rows(world * local_batch, kSeq, small_config().vocab_size, 40 + s));
  }
  const RunResult one =
      run_rank(level, {world * local_batch, kSeq}, DataParallel{}, nullptr, batches);
  // What separates the runs beyond float64 summation order: the loss's
  // gradient scale is staged as a float (StepScalars), 1/(global tokens)
  // for one model and 1/(local tokens) for each rank, whose mean over the
  // ranks divides by world -- exact for 2 ranks, not for 3.
  const double global_tokens = world * local_batch * kSeq;
  const double local = static_cast<float>(1.0 / (local_batch * kSeq));
  const double scale_error =
      std::abs(static_cast<float>(1.0 / global_tokens) - local / world) * global_tokens;
  const double tolerance = 1e-12 + 4 * scale_error;

  const DataParallel dp{world, shard, true};
  std::vector<RunResult> ranks(static_cast<std::size_t>(world));
  const std::vector<std::string> errors =
      run_on_threads(world, [&](ThreadCollectives& comm, int rank) {
        ranks[static_cast<std::size_t>(rank)] =
            run_rank(level, {local_batch, kSeq}, dp, &comm, batches);
      });
  const std::string name =
      level + " ranks " + std::to_string(world) + (shard ? " zero1" : " allreduce");
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << name;
    const RunResult& got = ranks[static_cast<std::size_t>(r)];
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(got.losses[s], one.losses[s], 1e-12 * one.losses[s]) << name << " step " << s;
    }
    expect_close(got.params, one.params, tolerance, name + " params rank " + std::to_string(r));
    expect_close(got.m, one.m, tolerance, name + " adam m rank " + std::to_string(r));
    expect_close(got.v, one.v, tolerance, name + " adam v rank " + std::to_string(r));
    // The ranks sum their gradients; grads() is the global batch's (the
    // whole of it where every rank holds it all).
    if (!shard) {
      expect_close(to_bytes(got.first_grads), to_bytes(one.first_grads), tolerance,
                   name + " step 1 gradient rank " + std::to_string(r));
    }
  }
  // The steps moved the weights: a comparison of untouched state proves nothing.
  const RunResult start = [&] {
    RunResult r;
    const ModelConfig cfg = small_config();
    CpuBackend backend;
    Model m(cfg, {2, kSeq}, graph_plan(level_preset(level), Precision::fp64(), cfg, {2, kSeq}),
            backend);
    m.set_params(initial_weights(m.layout(), 3));
    r.params = m.state_bytes(Model::StateBlock::Params);
    return r;
  }();
  EXPECT_NE(start.params, one.params);
}

// A CPU backend that records, for each GEMM, whether the model had said a
// gradient exchange runs beside it (gemms_beside_exchange, until
// join_side_updates) and whether it is one of the LM head's.
class ExchangeAwareGemms final : public CpuBackend {
 public:
  struct Call {
    bool forward, head, beside;
  };
  explicit ExchangeAwareGemms(int vocab) : vocab_(vocab) {}
  void gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha, float beta) override {
    // Only the head's operands have the (padded) vocabulary as a width.
    calls.push_back({forward, c.cols >= vocab_ || a.cols >= vocab_, beside_});
    CpuBackend::gemm(c, a, trans_a, b, trans_b, alpha, beta);
  }
  void gemms_beside_exchange() override { beside_ = true; }
  void join_side_updates() override {
    beside_ = false;
    CpuBackend::join_side_updates();
  }
  bool forward = false;
  std::vector<Call> calls;

 private:
  int vocab_;
  bool beside_ = false;
};

// Two steps of one rank of `comm` (nullptr: one process) on its backend.
void two_recorded_steps(ExchangeAwareGemms& backend, Collectives* comm, int world) {
  const ModelConfig cfg = small_config();
  const BatchShape shape{2, kSeq};
  StepPlan plan = graph_plan(level_preset("v2"), Precision::fp64(), cfg, shape);
  if (world > 1) plan.parallel = DataParallel{world, true, true};
  Model model(cfg, shape, plan, backend, comm);
  model.set_params(initial_weights(model.layout(), 3));
  AdamWHyper hp = test_hyper();
  for (int step = 0; step < 2; ++step) {
    model.set_batch(random_rows(2, kSeq, cfg.vocab_size, 70 + step));
    hp.step = step + 1;
    model.stage_step(1.0f, false, hp);
    backend.forward = true;
    model.forward_pass();
    backend.forward = false;
    model.backward_pass(/*update_layers=*/true);
    model.optimizer_pass();
  }
}

// The GEMMs that leave SMs to the exchange (CudaBackend's margin) are those
// issued while one runs: the backward pass's after the first layer's
// gradients went out. The forward pass's, the LM head's and the last
// layer's, which run before any exchange, keep every SM -- and in one
// process none leaves any.
TEST(DataParallelTraining, OnlyTheGemmsIssuedWhileAnExchangeRunsAreBesideIt) {
  const int world = 2;
  std::vector<std::unique_ptr<ExchangeAwareGemms>> backends;
  backends.reserve(world);
  for (int r = 0; r < world; ++r) {
    backends.push_back(std::make_unique<ExchangeAwareGemms>(small_config().vocab_size));
  }
  const std::vector<std::string> errors =
      run_on_threads(world, [&](ThreadCollectives& comm, int rank) {
        two_recorded_steps(*backends[static_cast<std::size_t>(rank)], &comm, world);
      });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    const auto& calls = backends[static_cast<std::size_t>(r)]->calls;
    int beside = 0, heads = 0;
    bool seen_beside = false;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto& c = calls[i];
      heads += c.head ? 1 : 0;
      if (c.forward || c.head) {
        EXPECT_FALSE(c.beside) << "rank " << r << " GEMM " << i << (c.head ? " (head)" : "");
      }
      // Once beside, the rest of that backward pass is (no join between).
      if (!c.forward && !c.head) {
        if (seen_beside) {
          EXPECT_TRUE(c.beside) << "rank " << r << " GEMM " << i;
        }
        seen_beside = c.beside;
      }
      if (c.forward) seen_beside = false;
      beside += c.beside ? 1 : 0;
    }
    EXPECT_GT(heads, 0) << "the head's GEMMs were recognised";
    // Of each step's backward block GEMMs, the last layer's keep every SM.
    const auto backward_blocks = std::count_if(calls.begin(), calls.end(),
                                               [](const auto& c) { return !c.forward && !c.head; });
    EXPECT_GT(beside, 0);
    EXPECT_LT(beside, backward_blocks);
    EXPECT_EQ(backward_blocks % (2 * small_config().num_layers), 0)
        << "each layer's backward issues as many block GEMMs";
    EXPECT_EQ(beside, backward_blocks / small_config().num_layers * (small_config().num_layers - 1))
        << "every layer's backward but the last layer's runs beside an exchange";
  }
  ExchangeAwareGemms alone(small_config().vocab_size);
  two_recorded_steps(alone, nullptr, 1);
  for (const auto& c : alone.calls) EXPECT_FALSE(c.beside) << "one process exchanges nothing";
}

TEST(DataParallelTraining, ShardedOptimizerMatchesOneModelOnTheGlobalBatch) {
  for (int world : {2, 3}) check_against_one_model("v2", world, /*shard=*/true);
}

TEST(DataParallelTraining, AllReducedGradientsMatchOneModelOnTheGlobalBatch) {
  check_against_one_model("v2", 2, /*shard=*/false);
  check_against_one_model("v1", 3, /*shard=*/false);  // per-tensor AdamW
}

TEST(DataParallelTraining, ShardedLevelThreeMatches) {
  check_against_one_model("v3", 2, /*shard=*/true);
}

// Collectives that offer windows (NCCL's symmetric memory, where the
// all-gathers can run on the copy engines): here plain host memory,
// counted.
class WindowedThreadCollectives : public ThreadCollectives {
 public:
  using ThreadCollectives::ThreadCollectives;
  void* allocate_window(std::size_t bytes) override {
    windows_.push_back(std::make_unique<std::vector<char>>(bytes));
    return windows_.back()->data();
  }
  void release_window(void* window) override {
    for (const auto& w : windows_) released_ += static_cast<int>(w->data() == window);
  }
  int allocated() const { return static_cast<int>(windows_.size()); }
  int released() const { return released_; }

 private:
  std::vector<std::unique_ptr<std::vector<char>>> windows_;
  int released_ = 0;
};

// The ranks reduce-scatter the gradients in place and, under AMP,
// all-gather the compute copy: the state block and the copy lie in the
// collectives' window where they offer one, and are released there when
// the model goes. (The CPU backend cannot train with a compute copy; that
// the windows train to the same bits is checked on GPUs, scripts/dp-check.)
TEST(DataParallelTraining, TheStateAndComputeCopyLieInTheCollectivesWindow) {
  const ModelConfig cfg = small_config();
  const BatchShape shape{2, kSeq};
  CpuBackend backend;
  StepPlan plan = graph_plan(level_preset("v2"), Precision{DType::F64, DType::F32}, cfg, shape);
  plan.parallel = DataParallel{2, true, true};
  ThreadHub hub(2);
  WindowedThreadCollectives comm(hub, 0);
  {
    const Model model(cfg, shape, plan, backend, &comm);
    EXPECT_EQ(comm.allocated(), 2);
    EXPECT_EQ(comm.released(), 0);
  }
  EXPECT_EQ(comm.released(), 2);
  // Without a compute copy (fp64 throughout) only the state is exchanged.
  StepPlan full = graph_plan(level_preset("v2"), Precision::fp64(), cfg, shape);
  full.parallel = plan.parallel;
  WindowedThreadCollectives full_comm(hub, 0);
  { const Model model(cfg, shape, full, backend, &full_comm); }
  EXPECT_EQ(full_comm.allocated(), 1);
  EXPECT_EQ(full_comm.released(), 1);
}

// A signal reaches one rank; every rank must learn of it after the same
// step, or the others would wait in the next step's collectives forever.
TEST(DataParallelTraining, AStopVoteOfOneRankReachesEveryRankAfterThatStep) {
  const int world = 3, voter = 2, vote_step = 1;
  const BatchShape shape{2, kSeq};
  std::vector<std::vector<bool>> agreed(static_cast<std::size_t>(world));
  const std::vector<std::string> errors =
      run_on_threads(world, [&](ThreadCollectives& comm, int r) {
        const ModelConfig cfg = small_config();
        CpuBackend backend;
        StepPlan plan = graph_plan(level_preset("v2"), Precision::fp64(), cfg, shape);
        plan.parallel = DataParallel{world, true, true};
        Model model(cfg, shape, plan, backend, &comm);
        model.set_params(initial_weights(model.layout(), 3));
        auto readback = backend.make_readback(sizeof(std::int32_t));
        AdamWHyper hp = test_hyper();
        for (int step = 0; step < 3; ++step) {
          model.set_batch(random_rows(shape.batch, kSeq, cfg.vocab_size, 60 + step * world + r));
          hp.step = step + 1;
          model.stage_step(1.0f, false, hp);
          model.stage_stop_vote(r == voter && step == vote_step);
          model.forward_pass();
          model.backward_pass(/*update_layers=*/true);
          model.optimizer_pass();
          model.enqueue_stop_readback(*readback);
          agreed[static_cast<std::size_t>(r)].push_back(Model::stop_voted(*readback));
        }
      });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(agreed[static_cast<std::size_t>(r)], (std::vector<bool>{false, true, false}))
        << "rank " << r;
  }
}

}  // namespace
}  // namespace tinyllama
