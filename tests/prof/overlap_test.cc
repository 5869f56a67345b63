// time_beside_other_streams from hand-made kernel records: which parts of a
// kernel's run had another stream's kernels beside it, counted once, never
// from its own stream (a programmatic dependent launch starts before the
// kernel ahead of it ends) or from another device; and the masks that pick
// what counts and what gets a figure.
#include "prof/overlap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tinyllama::prof {
namespace {

KernelRecord on(std::uint32_t stream, std::int64_t start, std::int64_t end,
                std::uint32_t device = 0) {
  KernelRecord k;
  k.name = "k";
  k.start_ns = start;
  k.end_ns = end;
  k.stream = stream;
  k.device = device;
  return k;
}

TEST(BesideOtherStreams, FullyPartlyAndAlone) {
  const std::vector<KernelRecord> k = {
      on(7, 0, 1000),     // the main stream's GEMM: the sweeps run beside 300 + 100 of it
      on(8, 100, 400),    // a sweep inside it
      on(8, 900, 1200),   // a sweep 100 of whose 300 ns it covers
      on(8, 1500, 1600),  // alone
  };
  EXPECT_EQ(time_beside_other_streams(k), (std::vector<std::int64_t>{400, 300, 100, 0}));
}

// A kernel launched with programmatic dependent launch starts while the one
// before it on its stream still runs: that is waiting, not work beside it.
TEST(BesideOtherStreams, OwnStreamAndOtherDevicesDoNotCount) {
  const std::vector<KernelRecord> k = {
      on(7, 0, 300),
      on(7, 50, 500),  // PDL: started before the kernel ahead of it ended
      on(9, 0, 1000, /*device=*/1),
  };
  EXPECT_EQ(time_beside_other_streams(k), (std::vector<std::int64_t>{0, 0, 0}));
}

TEST(BesideOtherStreams, SeveralStreamsCountOnce) {
  // Beside stream 7's kernel: [100, 400) from streams 8 and 9 (stream 6's
  // [250, 260) inside both), [600, 750) from two touching kernels, and the
  // first 10 ns of stream 6's last one.
  const std::vector<KernelRecord> k = {on(7, 0, 1000),  on(8, 100, 300), on(9, 200, 400),
                                       on(6, 250, 260), on(8, 600, 700), on(9, 700, 750),
                                       on(6, 990, 1500)};
  EXPECT_EQ(time_beside_other_streams(k)[0], 300 + 150 + 10);
  // Stream 8's first kernel: streams 7 (all of it) and 9 beside it, once.
  EXPECT_EQ(time_beside_other_streams(k)[1], 200);
}

TEST(BesideOtherStreams, MasksPickWhatCountsAndWhatIsAsked) {
  const std::vector<KernelRecord> k = {on(7, 0, 100), on(8, 50, 150), on(9, 0, 150)};
  // Only stream 9's kernel counts as work beside the others.
  EXPECT_EQ(time_beside_other_streams(k, {false, false, true}),
            (std::vector<std::int64_t>{100, 100, 0}));
  // Only stream 8's kernel gets a figure.
  EXPECT_EQ(time_beside_other_streams(k, {}, {false, true, false}),
            (std::vector<std::int64_t>{0, 100, 0}));
}

TEST(BesideOtherStreams, EmptyAndBackwardsRecords) {
  EXPECT_TRUE(time_beside_other_streams({}).empty());
  const std::vector<KernelRecord> k = {
      on(7, 100, 100),                  // zero length
      on(7, 300, 200),                  // ends before it starts
      on(8, 0, 1000), on(9, 500, 400),  // a backwards record covers nothing
  };
  EXPECT_EQ(time_beside_other_streams(k), (std::vector<std::int64_t>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace tinyllama::prof
