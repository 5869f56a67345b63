#pragma once
// Hand-made host ranges for the profiler's CPU tests.
#include <cstdint>
#include <vector>

#include "prof/host_ranges.h"

namespace tinyllama::prof {

// Appends a range (closed unless end is -1) inside `parent` (-1: at the top)
// and returns its index.
inline int add_range(std::vector<HostRange>& r, const char* name, int parent, std::int64_t start,
                     std::int64_t end) {
  HostRange h;
  h.name = name;
  h.parent = parent;
  h.depth = parent < 0 ? 0 : r[static_cast<std::size_t>(parent)].depth + 1;
  h.start_ns = start;
  h.end_ns = end;
  r.push_back(h);
  return static_cast<int>(r.size()) - 1;
}

}  // namespace tinyllama::prof
