// The compute copy's layout (model/compute_copy.h): with every slot kept
// it is the master layout itself; with slots cut out, the kept ones sit
// back to back in the master's order (padding with them), a run of kept
// slots maps to one run of the copy, and a cut slot has no offset.
#include "model/compute_copy.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace tinyllama {
namespace {

// The default (workshop) model: the layout's shape is all these tests read.
ModelConfig small() {
  return ModelConfig{};
}

TEST(ComputeCopyLayout, KeepingEverySlotIsTheMasterLayout) {
  const ParamLayout layout(small(), 64);
  const ComputeCopyLayout copy(layout, std::vector<bool>(layout.slots().size(), true));
  EXPECT_EQ(copy.total(), layout.total());
  for (const ParamSlot& s : layout.slots()) {
    EXPECT_TRUE(copy.keeps(s.offset));
    EXPECT_EQ(copy.offset(s.offset), s.offset);
    EXPECT_EQ(copy.offset(s.offset + s.numel() - 1), s.offset + s.numel() - 1);
  }
  const std::vector<SlotRun> runs = copy.runs(layout.layer_span(1));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].span.begin, layout.layer_span(1).begin);
  EXPECT_EQ(runs[0].span.end, layout.layer_span(1).end);
}

TEST(ComputeCopyLayout, CutSlotsLeaveTheKeptOnesBackToBack) {
  const ParamLayout layout(small());
  const std::vector<ParamSlot>& slots = layout.slots();
  std::vector<bool> keeps(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    // The norms and the embedding keep theirs; the four linears do not.
    keeps[i] = slots[i].is_norm || slots[i].offset == layout.embedding().offset;
  }
  const ComputeCopyLayout copy(layout, keeps);
  std::int64_t kept = 0, next = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::int64_t end = i + 1 < slots.size() ? slots[i + 1].offset : layout.total();
    EXPECT_EQ(copy.keeps(slots[i].offset), keeps[i]) << slots[i].name;
    if (!keeps[i]) {
      EXPECT_THROW(copy.offset(slots[i].offset), std::logic_error) << slots[i].name;
      continue;
    }
    EXPECT_EQ(copy.offset(slots[i].offset), next) << slots[i].name;
    next += end - slots[i].offset;
    kept += end - slots[i].offset;
  }
  EXPECT_EQ(copy.total(), kept);
  EXPECT_LT(copy.total(), layout.total());

  // A layer: its attention norm, QKV and out projection, its ffn norm,
  // gate/up and down: kept, cut, kept, cut.
  const std::vector<SlotRun> runs = copy.runs(layout.layer_span(0));
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].group, 1);
  EXPECT_EQ(runs[1].group, 0);
  EXPECT_EQ(runs[2].group, 1);
  EXPECT_EQ(runs[3].group, 0);
  EXPECT_EQ(runs[0].span.begin, layout.layer_span(0).begin);
  EXPECT_EQ(runs[3].span.end, layout.layer_span(0).end);
  for (std::size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i].span.begin, runs[i - 1].span.end);

  EXPECT_THROW(copy.keeps(layout.total()), std::out_of_range);
  EXPECT_THROW(ComputeCopyLayout(layout, std::vector<bool>(2, true)), std::invalid_argument);
}

TEST(ComputeCopyLayout, WithoutMixedPrecisionThereIsNoCopy) {
  const ParamLayout layout(small());
  StepPlan plan;
  plan.precision = Precision::fp32();
  EXPECT_EQ(ComputeCopyLayout(layout, plan).total(), 0);
  plan.precision = Precision::amp(DType::BF16);
  EXPECT_EQ(ComputeCopyLayout(layout, plan).total(), layout.total());
}

}  // namespace
}  // namespace tinyllama
