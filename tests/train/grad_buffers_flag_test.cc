// --grad-buffers: its values, its error, and that it changes only the
// gradient buffers of the preset it is applied to.
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "train/level_select.h"

namespace tinyllama {
namespace {

TEST(GradBuffersFlag, NamesFullAndRing) {
  EXPECT_EQ(parse_grad_buffers("full"), GradBuffers::Full);
  EXPECT_EQ(parse_grad_buffers("ring"), GradBuffers::Ring);
  try {
    parse_grad_buffers("rings");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--grad-buffers rings: allowed values are full, ring");
  }
}

TEST(GradBuffersFlag, ChangesOnlyTheGradientBuffers) {
  ToggleFlags flags;
  flags.grad_buffers = "ring";
  for (const std::string& level : implemented_levels()) {
    OpChoices expected = level_preset(level);
    expected.grad_buffers = GradBuffers::Ring;
    EXPECT_EQ(apply_toggle_flags(level_preset(level), flags), expected) << level;
  }
  EXPECT_EQ(apply_toggle_flags(level_preset("v2"), ToggleFlags{}).grad_buffers, GradBuffers::Full);
  ToggleFlags full;
  full.grad_buffers = "full";
  EXPECT_EQ(apply_toggle_flags(level_preset("v3"), full).grad_buffers, GradBuffers::Full);
}

}  // namespace
}  // namespace tinyllama
