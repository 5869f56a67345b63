// The op markers: nesting and paths while a recorder is attached, nothing
// recorded when none is, and OpSequence's one-op-at-a-time ranges.
#include "core/op_marker.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "prof/host_ranges.h"

namespace tinyllama::prof {
namespace {

// Attaches a recorder for one test, detaching it even when the test fails.
class Attached {
 public:
  Attached() { set_op_observer(&recorder); }
  ~Attached() { set_op_observer(nullptr); }
  HostRangeRecorder recorder;
};

TEST(OpMarker, ScopesNestIntoPaths) {
  Attached a;
  {
    const OpScope step("step");
    const OpScope phase("forward");
    const OpScope layer(layer_label(3));
    OpSequence ops;
    ops.next("attn_norm");
    ops.next("qkv_gemm");
    EXPECT_EQ(a.recorder.open_path(), "step/forward/layer3/qkv_gemm");
  }
  const auto& r = a.recorder.ranges();
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(a.recorder.path(3), "step/forward/layer3/attn_norm");
  EXPECT_EQ(a.recorder.path(4), "step/forward/layer3/qkv_gemm");
  EXPECT_EQ(r[3].parent, 2);
  EXPECT_EQ(r[4].parent, 2);
  EXPECT_EQ(r[4].depth, 3);
  // Consecutive ops do not overlap; everything is closed and inside its parent.
  EXPECT_LE(r[3].end_ns, r[4].start_ns);
  for (const HostRange& x : r) {
    EXPECT_GE(x.end_ns, x.start_ns);
    if (x.parent >= 0) {
      EXPECT_GE(x.start_ns, r[static_cast<std::size_t>(x.parent)].start_ns);
      EXPECT_LE(x.end_ns, r[static_cast<std::size_t>(x.parent)].end_ns);
    }
  }
  EXPECT_TRUE(a.recorder.idle());
  EXPECT_EQ(a.recorder.open_path(), "");
}

TEST(OpMarker, SequenceCloseEndsTheCurrentOpBeforeNestedMarkers) {
  Attached a;
  {
    const OpScope layer(layer_label(0));
    OpSequence ops;
    ops.next("rope");
    ops.close();
    {
      OpSequence inner;  // what a helper such as qkv_backward does
      inner.next("qkv_gemm_dgrad");
    }
    ops.next("attn_norm");
  }
  const auto& r = a.recorder.ranges();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(a.recorder.path(2), "layer0/qkv_gemm_dgrad");  // a sibling of rope, not its child
  EXPECT_EQ(a.recorder.path(3), "layer0/attn_norm");
}

TEST(OpMarker, NothingIsRecordedWithoutARecorder) {
  HostRangeRecorder recorder;
  {
    const OpScope op("forward");
    OpSequence ops;
    ops.next("embedding");
  }
  EXPECT_TRUE(recorder.ranges().empty());
  EXPECT_EQ(op_observer(), nullptr);
}

TEST(OpMarker, LayerLabelsAreStableAndReused) {
  const char* three = layer_label(3);
  EXPECT_STREQ(three, "layer3");
  EXPECT_STREQ(layer_label(120), "layer120");
  EXPECT_EQ(layer_label(3), three);  // the same storage: ranges keep the pointer
}

TEST(HostRanges, ClearOnlyWhenIdleAndStaleClosesAreHarmless) {
  HostRangeRecorder recorder;
  const int outer = recorder.open("step");
  const int inner = recorder.open("forward");
  EXPECT_FALSE(recorder.clear());
  recorder.close(outer);  // closes forward too
  recorder.close(inner);  // already closed: no effect
  EXPECT_TRUE(recorder.idle());
  EXPECT_GE(recorder.ranges()[1].end_ns, 0);
  EXPECT_TRUE(recorder.clear());
  EXPECT_TRUE(recorder.ranges().empty());
  recorder.close(inner);  // a stale index after a clear: no effect
}

}  // namespace
}  // namespace tinyllama::prof
