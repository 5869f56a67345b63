// Embedding lookup and its gradient against the float64 reference. The
// backward pass accumulates into a float32 table gradient that already holds
// values (the tied LM head writes first), with tokens repeated many times,
// including more positions than one block handles per chunk. The backend
// is not prepared here, so it runs the scan kernel; gpu_embedding_grad_test
// compares the scan and the sorted kernels at skewed distributions.
#include <cmath>
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/embedding/cpu_embedding.h"

namespace tinyllama::gpu_test {
namespace {

// (dtype, positions, vocab, dim): a dim of 37 (and rows padded by 2 and 3)
// takes the forward kernel's one-element path; 64 (rows padded by 8 and 16)
// its 16-byte vectors.
using EmbParam = std::tuple<DType, std::int64_t, int, std::int64_t>;

class GpuEmbedding : public GpuParamTest<EmbParam> {};

TEST_P(GpuEmbedding, ForwardAndAccumulatingBackward) {
  const auto [t, n, vocab, d] = GetParam();
  Harness h(t);
  std::vector<std::int32_t> ids = h.random_ids(n, vocab);
  ids.front() = vocab - 1;  // the last row of the table
  ids.back() = vocab - 1;   // and a repeat at the far end
  const Tokens tok = h.tokens(ids);

  const bool vectors = d % 8 == 0;
  const Twin table = h.input(vocab, d, t, 1.0, vectors ? 8 : 2);
  const Twin out = h.output(n, d, t, vectors ? 16 : 3);
  cpu::embedding_forward(out.cpu, tok.cpu, table.cpu);
  h.gpu().embedding_forward(out.gpu, tok.gpu, table.gpu);
  h.expect_close(out, 0.0, "embedding_forward (an exact copy)");

  // dtable already holds the LM head's gradient: the lookup adds to it.
  const Twin dtable = h.input(vocab, d, DType::F32, 1.0, 1);
  const Twin dout = h.input(n, d, t, 1.0, 2);
  cpu::embedding_backward(dtable.cpu, tok.cpu, dout.cpu);
  h.gpu().embedding_backward(dtable.gpu, tok.gpu, dout.gpu);
  // Sums of many exactly-shared values in fp32.
  h.expect_close(dtable, 1e-5 * 10, "embedding_backward (accumulates into float32)");
}

std::string emb_name(const ::testing::TestParamInfo<EmbParam>& info) {
  const auto [t, n, vocab, d] = info.param;
  return dtype_label(t) + "_N" + std::to_string(n) + "_V" + std::to_string(vocab) + "_D" +
         std::to_string(d);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuEmbedding,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values<std::int64_t>(1, 7, 100, 600),
                                            ::testing::Values(3, 13, 1000),
                                            ::testing::Values<std::int64_t>(37, 64)),
                         emb_name);

// An id outside the table reads nothing and leaves NaN in its row; the
// other rows are exact copies. The output starts finite, so a row the
// kernel skipped would show. Both of the kernel's paths (dims 37 and 64).
TEST_F(GpuTest, EmbeddingForwardMarksIdsOutsideTheTableWithNaN) {
  for (const std::int64_t d : {37, 64}) {
    Harness h(DType::BF16);
    const int vocab = 11;
    std::vector<std::int32_t> ids = h.random_ids(9, vocab);
    ids[2] = -1;
    ids[5] = vocab;
    const Tokens tok = h.tokens(ids);
    const Twin table = h.input(vocab, d, DType::BF16, 1.0);
    const Twin out = h.input(9, d, DType::BF16, 1.0);
    h.gpu().embedding_forward(out.gpu, tok.gpu, table.gpu);
    const std::vector<double> got = h.device_values(out.gpu);
    const std::vector<double> rows = Harness::host_values(table.cpu);
    for (std::size_t r = 0; r < ids.size(); ++r) {
      const bool inside = ids[r] >= 0 && ids[r] < vocab;
      for (std::int64_t c = 0; c < d; ++c) {
        const double v = got[r * static_cast<std::size_t>(d) + static_cast<std::size_t>(c)];
        if (inside) {
          EXPECT_EQ(v, rows[static_cast<std::size_t>(ids[r] * d + c)]) << "d " << d << " row " << r;
        } else {
          EXPECT_TRUE(std::isnan(v)) << "d " << d << " row " << r << " col " << c;
        }
      }
    }
  }
}

// Deterministic: the same inputs give bit-identical gradients.
TEST_F(GpuTest, EmbeddingBackwardIsDeterministic) {
  Harness h(DType::BF16);
  const std::int64_t n = 2048, d = 64;
  const int vocab = 50;
  const Tokens tok = h.tokens(h.random_ids(n, vocab));
  const Twin dout = h.input(n, d, DType::BF16);
  const Twin first = h.from_values(vocab, d, DType::F32, std::vector<double>(vocab * d, 0.0));
  const Twin second = h.from_values(vocab, d, DType::F32, std::vector<double>(vocab * d, 0.0));
  h.gpu().embedding_backward(first.gpu, tok.gpu, dout.gpu);
  h.gpu().embedding_backward(second.gpu, tok.gpu, dout.gpu);
  EXPECT_EQ(h.device_values(first.gpu), h.device_values(second.gpu));
}

}  // namespace
}  // namespace tinyllama::gpu_test
