#pragma once
// The memory timeline as a picture: live activation bytes stacked by kind
// against the op index of one step, step-shaped (an op holds its bytes for
// its whole width), with the arena's size dashed above them, the phases
// marked, axes, labels and a legend. Written as plain text (prof/svg_text.h
// escapes it), so the plot needs no plotting library.
#include <cstdint>
#include <string>

#include "prof/memory_timeline.h"

namespace tinyllama::prof {

// A complete SVG document. `title` heads it (the model and plan);
// driver_used_bytes, the most the driver's samples saw in use (-1: none
// taken), is noted beside the legend.
std::string memory_timeline_svg(const MemoryTimeline& tl, const std::string& title,
                                std::int64_t driver_used_bytes = -1);

}  // namespace tinyllama::prof
