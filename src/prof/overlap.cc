#include "prof/overlap.h"

#include <algorithm>
#include <map>
#include <utility>

namespace tinyllama::prof {
namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;  // [start, end)

// Sorted, disjoint, non-empty intervals covering what `spans` cover.
std::vector<Interval> merged(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Interval> out;
  for (const Interval& s : spans) {
    if (s.second <= s.first) continue;
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

// Nanoseconds of [begin, end) that the sorted disjoint `cover` covers.
std::int64_t covered_ns(const std::vector<Interval>& cover, std::int64_t begin, std::int64_t end) {
  // The first interval that ends after `begin`: the ends rise with the starts.
  auto it = std::upper_bound(cover.begin(), cover.end(), begin,
                             [](std::int64_t t, const Interval& c) { return t < c.second; });
  std::int64_t ns = 0;
  for (; it != cover.end() && it->first < end; ++it) {
    ns += std::min(end, it->second) - std::max(begin, it->first);
  }
  return ns;
}

bool flag(const std::vector<bool>& v, std::size_t i) {
  return v.empty() || v[i];
}

}  // namespace

std::vector<std::int64_t> time_beside_other_streams(const std::vector<KernelRecord>& kernels,
                                                    const std::vector<bool>& counts,
                                                    const std::vector<bool>& wanted) {
  std::vector<std::int64_t> beside(kernels.size(), 0);
  // The streams of the wanted kernels, per device; each gets the union of
  // the counted kernels on the device's other streams.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::size_t>> by_stream;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    if (flag(wanted, i)) by_stream[{kernels[i].device, kernels[i].stream}].push_back(i);
  }
  for (const auto& [where, members] : by_stream) {
    std::vector<Interval> others;
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      const KernelRecord& k = kernels[i];
      if (flag(counts, i) && k.device == where.first && k.stream != where.second) {
        others.emplace_back(k.start_ns, k.end_ns);
      }
    }
    const std::vector<Interval> cover = merged(std::move(others));
    for (std::size_t i : members) {
      const KernelRecord& k = kernels[i];
      if (k.end_ns > k.start_ns) beside[i] = covered_ns(cover, k.start_ns, k.end_ns);
    }
  }
  return beside;
}

}  // namespace tinyllama::prof
