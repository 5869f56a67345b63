#include "data/batch_sampler.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/errors.h"

namespace tinyllama {
namespace {

// Two files; token values encode (file, position) so rows can be traced.
TokenDataset two_files() {
  TokenDataset d;
  TokenPart a{"a", {}, {}};
  TokenPart b{"b", {}, {}};
  for (int i = 0; i < 41; ++i) a.tokens.push_back(static_cast<std::uint16_t>(i));
  for (int i = 0; i < 25; ++i) b.tokens.push_back(static_cast<std::uint16_t>(1000 + i));
  d.parts = {a, b};
  return d;
}

TEST(BatchSampler, EachEpochVisitsEveryWindowOnceWithinOneFile) {
  const TokenDataset d = two_files();
  BatchSampler s(d, 4, 99, true, "--data");
  // File a: windows at 0, 4, ..., 36 (10); file b: 0, 4, ..., 20 (6).
  ASSERT_EQ(s.windows(), 16);
  std::multiset<int> firsts;
  for (int i = 0; i < 8; ++i) {
    const std::vector<std::int32_t> rows = s.next_batch(2);
    ASSERT_EQ(rows.size(), 10u);
    for (int r = 0; r < 2; ++r) {
      const int first = rows[r * 5];
      for (int k = 1; k < 5; ++k) EXPECT_EQ(rows[r * 5 + k], first + k) << "a row is contiguous";
      firsts.insert(first);
    }
  }
  std::multiset<int> expected;
  for (int i = 0; i <= 36; i += 4) expected.insert(i);
  for (int i = 0; i <= 20; i += 4) expected.insert(1000 + i);
  EXPECT_EQ(firsts, expected);
}

TEST(BatchSampler, SeededShuffledAndResumable) {
  const TokenDataset d = two_files();
  BatchSampler a(d, 4, 1, true, "--data");
  BatchSampler b(d, 4, 1, true, "--data");
  BatchSampler other(d, 4, 2, true, "--data");
  BatchSampler ordered(d, 4, 1, false, "--data");
  std::vector<std::int32_t> seq_a;
  std::vector<std::int32_t> seq_other;
  for (int i = 0; i < 5; ++i) {
    const auto x = a.next_batch(3);
    EXPECT_EQ(x, b.next_batch(3));
    seq_a.insert(seq_a.end(), x.begin(), x.end());
    const auto y = other.next_batch(3);
    seq_other.insert(seq_other.end(), y.begin(), y.end());
  }
  EXPECT_NE(seq_a, seq_other) << "the seed decides the order";
  EXPECT_EQ(ordered.next_batch(1)[0], 0);
  EXPECT_EQ(ordered.next_batch(1)[0], 4);

  // Past an epoch boundary (16 windows), then restored into a fresh sampler.
  const nlohmann::json state = a.state();
  BatchSampler restored(d, 4, 1, true, "--data");
  restored.restore(state);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_batch(3), restored.next_batch(3)) << i;

  BatchSampler wrong_seed(d, 4, 5, true, "--data");
  EXPECT_THROW(wrong_seed.restore(state), UsageError);
  BatchSampler wrong_seq(d, 5, 1, true, "--data");
  EXPECT_THROW(wrong_seq.restore(state), UsageError);
}

TEST(BatchSampler, DataShorterThanARowIsRefusedNamingTheFlag) {
  TokenDataset d;
  d.parts = {{"tiny.txt", {256, 65, 66}, {}}};
  try {
    BatchSampler s(d, 8, 1, true, "--val-data");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--val-data: 1 file, 3 tokens hold no row"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tinyllama
