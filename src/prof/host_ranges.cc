#include "prof/host_ranges.h"

#include <chrono>

namespace tinyllama::prof {

std::int64_t host_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

HostRangeRecorder::HostRangeRecorder() {
  // A step of the default model opens a few hundred ranges; reserving keeps
  // reallocation out of the profiled steps for the common sizes.
  ranges_.reserve(1 << 15);
  stack_.reserve(16);
}

int HostRangeRecorder::open(const char* name) {
  HostRange r;
  r.name = name;
  r.parent = stack_.empty() ? -1 : stack_.back();
  r.depth = static_cast<int>(stack_.size());
  const int index = static_cast<int>(ranges_.size());
  ranges_.push_back(r);
  stack_.push_back(index);
  // Taken last, so the bookkeeping above is outside the measured range.
  ranges_.back().start_ns = host_now_ns();
  return index;
}

void HostRangeRecorder::close(int index) noexcept {
  const std::int64_t now = host_now_ns();
  if (index < 0 || index >= static_cast<int>(ranges_.size()) ||
      ranges_[static_cast<std::size_t>(index)].end_ns >= 0) {
    return;  // already closed by an enclosing range's close
  }
  while (!stack_.empty()) {
    const int top = stack_.back();
    stack_.pop_back();
    ranges_[static_cast<std::size_t>(top)].end_ns = now;
    if (top == index) return;
  }
}

std::string HostRangeRecorder::path(int index) const {
  std::vector<const char*> names;
  for (int i = index; i >= 0; i = ranges_[static_cast<std::size_t>(i)].parent) {
    names.push_back(ranges_[static_cast<std::size_t>(i)].name);
  }
  std::string p;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (!p.empty()) p += '/';
    p += *it;
  }
  return p;
}

std::string HostRangeRecorder::open_path() const {
  return stack_.empty() ? std::string() : path(stack_.back());
}

bool HostRangeRecorder::clear() {
  if (!stack_.empty()) return false;
  ranges_.clear();
  return true;
}

}  // namespace tinyllama::prof
