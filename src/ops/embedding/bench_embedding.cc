// The kernel bench's token embedding: the lookup, and the gradient's
// scatter-add into the table, which accumulates onto what the tied LM head
// wrote. Which gradient kernel runs (scan or sorted) is the prepared plan's
// choice.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/embedding/bench_embedding.h"

namespace tinyllama::bench {
namespace {

// Positions whose tokens choose the embedding rows a backward check
// compares (plus the table's first rows, whether a token hits them or not).
constexpr std::int64_t kCheckedTokens = 64;
constexpr std::int64_t kCheckedLeadingRows = 16;

// Sorted distinct values.
Index distinct(std::vector<std::int64_t> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// Where each of `ids` sits in `rows` (every id is in it).
std::vector<std::int32_t> compact_ids(const std::vector<std::int64_t>& ids, const Index& rows) {
  std::vector<std::int32_t> out;
  out.reserve(ids.size());
  for (const std::int64_t id : ids) {
    const auto at = std::lower_bound(rows.begin(), rows.end(), id);
    out.push_back(static_cast<std::int32_t>(at - rows.begin()));
  }
  return out;
}

class EmbeddingCase final : public OpCase {
 public:
  EmbeddingCase(BenchContext& ctx, Pass pass, bool zipf_tokens)
      : ctx_(ctx), buffers_(ctx.gpu, ctx.seed), pass_(pass) {
    const std::int64_t t = ctx.tokens();
    const std::int64_t d = ctx.cfg.hidden_dim;
    const int vocab = ctx.cfg.vocab_size;
    tokens_ = buffers_.tokens(t, vocab, host_tokens_,
                              zipf_tokens ? DeviceBuffers::Mix::Zipf : DeviceBuffers::Mix::Uniform);
    if (pass == Pass::Forward) {
      table_ = buffers_.random(vocab, d, ctx.act(), -1, 1);  // the compute copy of E
      rows_ = buffers_.poisoned(t, d, ctx.act());
    } else {
      table_ = buffers_.random(vocab, d, ctx.master(), -1, 1);  // dE, as the LM head left it
      rows_ = buffers_.random(t, d, ctx.act(), -1, 1);          // d(embedding output)
    }
  }

  // The backward accumulates: repeated runs keep adding the same rows.
  void run() override {
    if (pass_ == Pass::Forward) {
      ctx_.gpu.embedding_forward(rows_, tokens_, table_);
    } else {
      ctx_.gpu.embedding_backward(table_, tokens_, rows_);
    }
  }

  CheckResult check() override {
    return pass_ == Pass::Forward ? check_forward() : check_backward();
  }

 private:
  CheckResult check_forward() {
    Backend& gpu = ctx_.gpu;
    const Index positions = leading_rows(rows_.rows, rows_.cols, ctx_.check_elements);
    const Index cols = all_of(rows_.cols);
    std::vector<std::int64_t> ids;
    for (const std::int64_t p : positions) ids.push_back(host_tokens_[static_cast<std::size_t>(p)]);
    const Index table_rows = distinct(ids);
    HostMat table = gather(gpu, table_, table_rows, cols);
    const std::vector<std::int32_t> local = compact_ids(ids, table_rows);
    run();
    HostMat out(static_cast<std::int64_t>(positions.size()), rows_.cols);
    CpuBackend cpu;
    cpu.embedding_forward(out.mat(), local.data(), table.mat());
    Comparison cmp;
    cmp.add("out", gather(gpu, rows_, positions, cols), out);
    return cmp.result(rows_scope(positions, rows_.rows));
  }

  // The table rows of the first tokens and the table's first rows, with
  // every position whose token falls in them.
  CheckResult check_backward() {
    Backend& gpu = ctx_.gpu;
    const Index cols = all_of(table_.cols);
    std::vector<std::int64_t> chosen =
        all_of(std::min<std::int64_t>(kCheckedLeadingRows, table_.rows));
    for (std::int64_t p = 0; p < std::min<std::int64_t>(kCheckedTokens, rows_.rows); ++p) {
      chosen.push_back(host_tokens_[static_cast<std::size_t>(p)]);
    }
    const Index table_rows = distinct(chosen);
    Index positions;
    std::vector<std::int64_t> ids;
    for (std::int64_t p = 0; p < rows_.rows; ++p) {
      const std::int64_t id = host_tokens_[static_cast<std::size_t>(p)];
      if (std::binary_search(table_rows.begin(), table_rows.end(), id)) {
        positions.push_back(p);
        ids.push_back(id);
      }
    }
    HostMat table = gather(gpu, table_, table_rows, cols);
    HostMat dout = gather(gpu, rows_, positions, cols);
    const std::vector<std::int32_t> local = compact_ids(ids, table_rows);
    run();
    CpuBackend cpu;
    cpu.embedding_backward(table.mat(), local.data(), dout.mat());
    Comparison cmp;
    cmp.add("dtable", gather(gpu, table_, table_rows, cols), table);
    return cmp.result(std::to_string(table_rows.size()) + " of " + std::to_string(table_.rows) +
                      " table rows (the first tokens' and rows 0-" +
                      std::to_string(std::min<std::int64_t>(kCheckedLeadingRows, table_.rows) - 1) +
                      "), from all " + std::to_string(positions.size()) +
                      " positions holding them");
  }

  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Pass pass_;
  std::vector<std::int32_t> host_tokens_;
  const std::int32_t* tokens_ = nullptr;
  Mat table_;  // E (forward) or dE (backward)
  Mat rows_;   // the looked-up rows (forward) or their gradient (backward)
};

}  // namespace

std::unique_ptr<OpCase> make_embedding(BenchContext& ctx, Pass pass, bool zipf_tokens) {
  return std::make_unique<EmbeddingCase>(ctx, pass, zipf_tokens);
}

}  // namespace tinyllama::bench
