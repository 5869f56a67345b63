// The embedding gradient's two kernels (scan, sorted) against the float64
// reference at the token distributions that separate them: every position
// on one id (the worst collision), a Zipf-skewed and a byte-text
// distribution, id counts at and around the sorted kernel's chunk length
// (runs that end exactly on a chunk edge, span two chunks, or one more
// row), widths that take the vector and the one-column paths, padded rows,
// vocabularies of no particular multiple, and enough positions that the
// chunks grow past 32 rows. Both accumulate into a float32 table gradient
// that already holds the tied LM head's part.
#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/embedding/cpu_embedding.h"
#include "ops/embedding/cuda_embedding.h"

namespace tinyllama::gpu_test {
namespace {

enum class Dist { Uniform, OneId, Zipf, Text, ChunkEdges };

struct GradCase {
  const char* name;
  std::int64_t n;
  std::int64_t dim;
  int vocab;
  Dist dist;
  std::int64_t pad = 0;  // elements after each row of dout and of dtable
  // Dist::ChunkEdges: the sorted kernel's chunk length at n positions (32
  // from 16K positions up to 128K, 4 up to 2048, 8 up to 4096).
  std::int64_t chunk = 32;
};

void PrintTo(const GradCase& c, std::ostream* os) {
  *os << c.name << " (N " << c.n << ", D " << c.dim << ", V " << c.vocab << ")";
}

// Ids with the given counts (id i % vocab occurs counts[i] times), in a
// shuffled position order: the sort, not the input order, makes the runs.
std::vector<std::int32_t> with_counts(Harness& h, const std::vector<std::int64_t>& counts,
                                      int vocab, std::int64_t n) {
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; ids.size() < static_cast<std::size_t>(n); ++i) {
    const std::int64_t c = counts[i % counts.size()];
    for (std::int64_t k = 0; k < c && ids.size() < static_cast<std::size_t>(n); ++k) {
      ids.push_back(static_cast<std::int32_t>(i % static_cast<std::size_t>(vocab)));
    }
  }
  for (std::size_t i = ids.size(); i > 1; --i) {
    std::swap(ids[i - 1], ids[static_cast<std::size_t>(h.rng().below(i))]);
  }
  return ids;
}

std::vector<std::int32_t> ids_for(Harness& h, const GradCase& c) {
  switch (c.dist) {
    case Dist::Uniform:
      return h.random_ids(c.n, c.vocab);
    case Dist::OneId:  // the table's last row, every position
      return std::vector<std::int32_t>(static_cast<std::size_t>(c.n), c.vocab - 1);
    case Dist::Zipf: {
      // P(id) proportional to 1 / (id + 1).
      std::vector<double> cdf(static_cast<std::size_t>(c.vocab));
      double sum = 0;
      for (int id = 0; id < c.vocab; ++id)
        cdf[static_cast<std::size_t>(id)] = sum += 1.0 / (id + 1);
      std::vector<std::int32_t> ids;
      for (std::int64_t i = 0; i < c.n; ++i) {
        const double u = h.rng().uniform() * sum;
        ids.push_back(static_cast<std::int32_t>(std::min<std::int64_t>(
            std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin(), c.vocab - 1)));
      }
      return ids;
    }
    case Dist::Text: {  // the bytes of English text, as the byte-level tokenizer gives them
      const std::string text =
          "The quick brown fox jumps over the lazy dog, and then it sleeps in the shade of an "
          "old tree until the evening comes. ";
      std::vector<std::int32_t> ids;
      for (std::int64_t i = 0; i < c.n; ++i) {
        ids.push_back(static_cast<unsigned char>(text[static_cast<std::size_t>(i) % text.size()]) %
                      c.vocab);
      }
      return ids;
    }
    case Dist::ChunkEdges: {  // runs of 1, just under, at, just over, two and over two chunks
      const std::int64_t e = c.chunk;
      return with_counts(h, {1, e - 1, e, e + 1, 2 * e, 2 * e + 1, 3 * e + 1, 2}, c.vocab, c.n);
    }
  }
  return {};
}

// cuda::embedding_backward_sorted with its own scratch, poisoned first so
// that a partial sum read before it is written shows as NaN.
class SortedScratch {
 public:
  SortedScratch(Harness& h, std::int64_t positions, std::int64_t dim, std::int64_t vocab) : h_(h) {
    const std::int64_t bytes = cuda::EmbeddingGradScratch::bytes_for(positions, dim, vocab);
    block_ = h.gpu().allocate(static_cast<std::size_t>(bytes));
    std::vector<unsigned char> poison(static_cast<std::size_t>(bytes), 0xff);
    h.gpu().upload(block_, poison.data(), poison.size());
    scratch_ = cuda::EmbeddingGradScratch::assigned(block_, positions, dim, vocab);
  }
  ~SortedScratch() { h_.gpu().release(block_); }
  SortedScratch(const SortedScratch&) = delete;
  SortedScratch& operator=(const SortedScratch&) = delete;

  void run(const Mat& dtable, const std::int32_t* tokens, const Mat& dout) {
    cuda::embedding_backward_sorted(dtable, tokens, dout, scratch_, h_.gpu().stream());
    h_.gpu().synchronize();
  }

 private:
  Harness& h_;
  void* block_ = nullptr;
  cuda::EmbeddingGradScratch scratch_;
};

// Sums of up to 131079 rows of N(0, 1) values, added in float32: relative
// to the largest reference magnitude, well inside 1e-4 when every row is
// added once (a row added twice or missed moves it by ~1 / sqrt(count)).
constexpr double kGradTolerance = 1e-4;

using GradParam = std::tuple<DType, GradCase>;

class GpuEmbeddingGrad : public GpuParamTest<GradParam> {};

TEST_P(GpuEmbeddingGrad, ScanAndSortedAccumulateTheReferenceSum) {
  const auto& [t, c] = GetParam();
  Harness h(t);
  const Tokens tok = h.tokens(ids_for(h, c));
  const Twin dout = h.input(c.n, c.dim, t, 1.0, c.pad);
  // The LM head's part, already in the gradient: both kernels add to it.
  const Twin lm_head = h.input(c.vocab, c.dim, DType::F32, 1.0, c.pad);
  const std::vector<double> head_part = Harness::host_values(lm_head.cpu);
  cpu::embedding_backward(lm_head.cpu, tok.cpu, dout.cpu);  // now the expected sum

  // Device copies of the LM head's part whose host side is the expected sum.
  const Twin scan = h.from_values(c.vocab, c.dim, DType::F32, head_part, c.pad);
  const Twin sorted = h.from_values(c.vocab, c.dim, DType::F32, head_part, c.pad);
  for (const Twin* out : {&scan, &sorted}) {
    std::copy_n(lm_head.cpu.ptr<double>(), lm_head.cpu.rows * lm_head.cpu.ld,
                out->cpu.ptr<double>());
  }
  cuda::embedding_backward_scan(scan.gpu, tok.gpu, dout.gpu, h.gpu().stream());
  SortedScratch scratch(h, c.n, c.dim, c.vocab);
  scratch.run(sorted.gpu, tok.gpu, dout.gpu);
  h.expect_close(scan, kGradTolerance, std::string("scan, ") + c.name);
  h.expect_close(sorted, kGradTolerance, std::string("sorted, ") + c.name);
}

const GradCase kCases[] = {
    {"uniform", 1000, 37, 13, Dist::Uniform},
    {"one_position", 1, 37, 7, Dist::Uniform},
    {"one_id", 5000, 64, 1000, Dist::OneId},
    // 4096 chunks of 32 rows at most: 131079 positions make chunks of 64.
    {"one_id_grown_chunks", 131079, 24, 3, Dist::OneId},
    {"zipf_gpt2_vocab", 4097, 40, 50257, Dist::Zipf},
    {"text_bytes", 8192, 512, 259, Dist::Text},
    {"chunk_edges", 16001, 33, 1000, Dist::ChunkEdges},
    {"chunk_edges_wide", 2048, 136, 11, Dist::ChunkEdges, 0, 4},
    {"chunk_edges_of_4", 1000, 33, 100, Dist::ChunkEdges, 0, 4},
    {"chunk_edges_of_8", 3001, 64, 100, Dist::ChunkEdges, 0, 8},
    {"chunk_edges_of_16", 8192, 40, 1000, Dist::ChunkEdges, 0, 16},
    {"padded_rows", 777, 64, 1000, Dist::Zipf, 3},
};

std::string grad_name(const ::testing::TestParamInfo<GradParam>& info) {
  const auto& [t, c] = info.param;
  return dtype_label(t) + "_" + c.name;
}

INSTANTIATE_TEST_SUITE_P(Distributions, GpuEmbeddingGrad,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::ValuesIn(kCases)),
                         grad_name);

// Repeatable to the bit, at the skew where the scan kernel is slowest.
TEST_F(GpuTest, SortedEmbeddingGradIsBitwiseRepeatable) {
  Harness h(DType::BF16);
  const GradCase c{"zipf", 32768, 512, 1000, Dist::Zipf};
  const Tokens tok = h.tokens(ids_for(h, c));
  const Twin dout = h.input(c.n, c.dim, DType::BF16);
  const Twin head = h.input(c.vocab, c.dim, DType::F32);
  const std::vector<double> head_part = Harness::host_values(head.cpu);
  const Twin first = h.from_values(c.vocab, c.dim, DType::F32, head_part);
  const Twin second = h.from_values(c.vocab, c.dim, DType::F32, head_part);
  SortedScratch scratch(h, c.n, c.dim, c.vocab);
  scratch.run(first.gpu, tok.gpu, dout.gpu);
  scratch.run(second.gpu, tok.gpu, dout.gpu);
  const std::vector<double> a = h.device_values(first.gpu);
  EXPECT_EQ(a, h.device_values(second.gpu));
  EXPECT_NE(a, head_part) << "the gradient was added";
}

// Positions whose token is outside the table add nothing (as the scan
// kernel, which skips them): the result is the reference over the others.
TEST_F(GpuTest, SortedEmbeddingGradSkipsOutOfRangeTokens) {
  Harness h(DType::F32);
  const std::int64_t n = 300, dim = 16;
  const int vocab = 29;
  std::vector<std::int32_t> ids = h.random_ids(n, vocab);
  std::vector<std::int32_t> valid;
  const Twin dout = h.input(n, dim, DType::F32);
  std::vector<double> kept;
  const std::vector<double> all = Harness::host_values(dout.cpu);
  for (std::int64_t i = 0; i < n; ++i) {
    if (i % 7 == 3) ids[static_cast<std::size_t>(i)] = i % 2 == 0 ? -1 : vocab;
    if (ids[static_cast<std::size_t>(i)] >= 0 && ids[static_cast<std::size_t>(i)] < vocab) {
      valid.push_back(ids[static_cast<std::size_t>(i)]);
      kept.insert(kept.end(), all.begin() + i * dim, all.begin() + (i + 1) * dim);
    }
  }
  const Tokens tok = h.tokens(ids);
  const Twin dtable = h.input(vocab, dim, DType::F32);
  const Twin valid_rows =
      h.from_values(static_cast<std::int64_t>(valid.size()), dim, DType::F32, kept);
  cpu::embedding_backward(dtable.cpu, valid.data(), valid_rows.cpu);
  SortedScratch scratch(h, n, dim, vocab);
  scratch.run(dtable.gpu, tok.gpu, dout.gpu);
  h.expect_close(dtable, kGradTolerance, "sorted, out-of-range tokens skipped");
}

// A call larger than the scratch was planned for is refused, not run past it.
TEST_F(GpuTest, SortedEmbeddingGradRefusesACallLargerThanPlanned) {
  Harness h(DType::F32);
  const Tokens tok = h.tokens(h.random_ids(65, 10));
  const Twin dout = h.input(65, 8, DType::F32);
  const Twin dtable = h.input(10, 8, DType::F32);
  SortedScratch scratch(h, 64, 8, 10);
  EXPECT_THROW(scratch.run(dtable.gpu, tok.gpu, dout.gpu), RuntimeFailure);
}

// A model the backend tests plan for: one small layer, 300 ids.
ModelConfig one_layer_model() {
  ModelConfig cfg;
  cfg.vocab_size = 300;
  cfg.hidden_dim = 64;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.num_layers = 1;
  cfg.ffn_dim = 128;
  return cfg;
}

// Through the backend: the plan's choice decides what prepare() sets up
// (the sort's scratch is a planned workspace of its own, in the memory
// check's figure) and which kernel embedding_backward runs.
TEST_F(GpuTest, BackendRunsThePlansEmbeddingGradient) {
  const ModelConfig cfg = one_layer_model();
  const BatchShape shape{4, 96};
  const GradCase c{"zipf", shape.tokens(), cfg.hidden_dim, cfg.vocab_size, Dist::Zipf};
  for (const EmbeddingGradImpl impl : {EmbeddingGradImpl::Sorted, EmbeddingGradImpl::Scan}) {
    SCOPED_TRACE(impl_name(impl));
    Harness h(DType::BF16);
    OpChoices ops = level_preset("v2");
    ops.embedding_grad = impl;
    StepPlan plan = plan_for_choices(ops, precision_for(DType::BF16), h.gpu().caps(), cfg, shape);
    plan.workspaces = backend_workspaces(DeviceKind::Cuda, cfg, shape, plan);
    const bool planned =
        std::any_of(plan.workspaces.begin(), plan.workspaces.end(),
                    [](const Workspace& w) { return w.name == "embedding_grad" && w.bytes > 0; });
    EXPECT_EQ(planned, impl == EmbeddingGradImpl::Sorted);
    h.gpu().prepare(cfg, shape, plan);
    EXPECT_EQ(h.gpu().workspace_bytes(), plan.workspace_bytes());

    const Tokens tok = h.tokens(ids_for(h, c));
    const Twin dout = h.input(c.n, c.dim, DType::BF16);
    const Twin dtable = h.input(c.vocab, c.dim, DType::F32);
    cpu::embedding_backward(dtable.cpu, tok.cpu, dout.cpu);
    h.gpu().embedding_backward(dtable.gpu, tok.gpu, dout.gpu);
    h.expect_close(dtable, kGradTolerance, "backend embedding_backward");
    // The sorted kernel refuses a call beyond its scratch; the scan needs none.
    if (impl == EmbeddingGradImpl::Sorted) {
      const Tokens more = h.tokens(h.random_ids(c.n + 1, c.vocab));
      const Twin more_rows = h.input(c.n + 1, c.dim, DType::BF16);
      EXPECT_THROW(h.gpu().embedding_backward(dtable.gpu, more.gpu, more_rows.gpu), RuntimeFailure);
    }
  }
}

// Backend::embedding_backward_prepare sorts the tokens ahead (on the update
// stream when the plan runs parallel branches); the embedding_backward over
// the same tokens then only accumulates, to the same bits as one call. A
// call over other tokens than the prepared ones sorts its own.
TEST_F(GpuTest, BackendSortsTheTokensAheadOfTheGradient) {
  const ModelConfig cfg = one_layer_model();
  const BatchShape shape{4, 96};
  const GradCase c{"zipf", shape.tokens(), cfg.hidden_dim, cfg.vocab_size, Dist::Zipf};
  for (const bool branches : {true, false}) {
    SCOPED_TRACE(branches ? "parallel branches" : "one stream");
    Harness h(DType::BF16);
    StepPlan plan = plan_for_choices(level_preset("v4"), precision_for(DType::BF16), h.gpu().caps(),
                                     cfg, shape);
    ASSERT_EQ(plan.ops.embedding_grad, EmbeddingGradImpl::Sorted);
    plan.parallel_branches = branches;
    h.gpu().prepare(cfg, shape, plan);

    const Tokens tok = h.tokens(ids_for(h, c));
    const Tokens other = h.tokens(h.random_ids(c.n, c.vocab));
    const Twin dout = h.input(c.n, c.dim, DType::BF16);
    const Twin head = h.input(c.vocab, c.dim, DType::F32);
    const std::vector<double> head_part = Harness::host_values(head.cpu);
    const Twin ahead = h.from_values(c.vocab, c.dim, DType::F32, head_part);
    const Twin whole = h.from_values(c.vocab, c.dim, DType::F32, head_part);
    const Twin stale = h.from_values(c.vocab, c.dim, DType::F32, head_part);
    cpu::embedding_backward(ahead.cpu, tok.cpu, dout.cpu);
    cpu::embedding_backward(stale.cpu, other.cpu, dout.cpu);

    h.gpu().embedding_backward_prepare(tok.gpu, c.n, c.vocab);
    h.gpu().embedding_backward(ahead.gpu, tok.gpu, dout.gpu);
    h.gpu().embedding_backward(whole.gpu, tok.gpu, dout.gpu);  // nothing prepared: all of it
    h.gpu().embedding_backward_prepare(tok.gpu, c.n, c.vocab);
    h.gpu().embedding_backward(stale.gpu, other.gpu, dout.gpu);  // not the prepared tokens
    h.gpu().synchronize();
    h.expect_close(ahead, kGradTolerance, "sorted ahead");
    h.expect_close(stale, kGradTolerance, "other tokens than the prepared ones");
    EXPECT_EQ(h.device_values(ahead.gpu), h.device_values(whole.gpu))
        << "sorting ahead must not change the sum's order";
  }
}

}  // namespace
}  // namespace tinyllama::gpu_test
