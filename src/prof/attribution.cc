#include "prof/attribution.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace tinyllama::prof {
namespace {

bool is_layer_label(const std::string& part) {
  return part.size() > 5 && part.compare(0, 5, "layer") == 0 &&
         part.find_first_not_of("0123456789", 5) == std::string::npos;
}

// Finds the innermost host range containing a time, in O(log n + depth).
class RangeFinder {
 public:
  explicit RangeFinder(const std::vector<HostRange>& ranges) : ranges_(ranges) {
    order_.resize(ranges.size());
    for (std::size_t i = 0; i < ranges.size(); ++i) order_[i] = static_cast<int>(i);
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
      return ranges_[static_cast<std::size_t>(a)].start_ns <
             ranges_[static_cast<std::size_t>(b)].start_ns;
    });
  }

  // Ranges nest, so the last one to start at or before t either contains t
  // or ended before it, and then so did every range it encloses: the
  // innermost range containing t is it or its nearest ancestor that does.
  int innermost(std::int64_t t) const {
    auto it = std::upper_bound(order_.begin(), order_.end(), t, [&](std::int64_t v, int i) {
      return v < ranges_[static_cast<std::size_t>(i)].start_ns;
    });
    if (it == order_.begin()) return -1;
    for (int i = *(it - 1); i >= 0; i = ranges_[static_cast<std::size_t>(i)].parent) {
      if (ranges_[static_cast<std::size_t>(i)].end_ns >= t) return i;
    }
    return -1;
  }

 private:
  const std::vector<HostRange>& ranges_;
  std::vector<int> order_;
};

}  // namespace

std::string strip_step(const std::string& path) {
  if (path == "step") return "";
  if (path.rfind("step/", 0) == 0) return path.substr(5);
  return path;
}

std::string op_kind_key(const std::string& op_path) {
  std::string key;
  std::size_t begin = 0;
  while (begin <= op_path.size()) {
    std::size_t end = op_path.find('/', begin);
    if (end == std::string::npos) end = op_path.size();
    const std::string part = op_path.substr(begin, end - begin);
    if (!is_layer_label(part)) {
      if (!key.empty()) key += '/';
      key += part;
    }
    begin = end + 1;
  }
  return key;
}

Attribution attribute(const std::vector<HostRange>& ranges, const GpuActivity* gpu) {
  Attribution a;
  std::vector<std::string> full(ranges.size());
  a.range_paths.resize(ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const HostRange& r = ranges[i];
    full[i] = r.parent >= 0 ? full[static_cast<std::size_t>(r.parent)] + "/" + r.name : r.name;
    a.range_paths[i] = strip_step(full[i]);
    if (r.parent < 0 && std::strcmp(r.name, "step") == 0 && r.end_ns >= r.start_ns) {
      a.steps.push_back(static_cast<int>(i));
      a.step_ns += r.end_ns - r.start_ns;
    } else if (r.end_ns >= r.start_ns && !a.range_paths[i].empty()) {
      OpTime& t = a.ops[a.range_paths[i]];
      ++t.host_calls;
      t.host_ns += r.end_ns - r.start_ns;
    }
  }
  if (gpu == nullptr) return a;

  const RangeFinder finder(ranges);
  auto in_step = [&](std::int64_t t) {
    const int i = finder.innermost(t);
    if (i < 0) return false;
    int root = i;
    while (ranges[static_cast<std::size_t>(root)].parent >= 0) {
      root = ranges[static_cast<std::size_t>(root)].parent;
    }
    return std::find(a.steps.begin(), a.steps.end(), root) != a.steps.end();
  };
  // A record belongs to the step whose host range launched it: the trainer
  // enqueues steps ahead, so a kernel often runs after its step's range has
  // closed, while the next step is being launched. Without its API record,
  // the record's own start time decides.
  auto launched_in_step = [&](int api, std::int64_t start_ns) {
    return in_step(api >= 0 ? gpu->api_calls[static_cast<std::size_t>(api)].start_ns : start_ns);
  };
  std::unordered_map<std::uint32_t, int> api_by_correlation;
  for (std::size_t i = 0; i < gpu->api_calls.size(); ++i) {
    api_by_correlation.emplace(gpu->api_calls[i].correlation, static_cast<int>(i));
  }
  // The op of one GPU record, and the API call that launched it.
  auto op_of = [&](std::uint64_t graph_node, std::uint32_t correlation, int* api,
                   bool* by_node) -> std::string {
    const auto c = api_by_correlation.find(correlation);
    *api = c != api_by_correlation.end() ? c->second : -1;
    *by_node = false;
    if (graph_node != 0) {
      const auto tag = gpu->graph_node_ops.find(graph_node);
      if (tag != gpu->graph_node_ops.end()) {
        *by_node = true;
        const std::string path = strip_step(tag->second);
        return path.empty() ? kStepOp : path;
      }
    }
    if (*api < 0) return kUnattributed;
    const int range = finder.innermost(gpu->api_calls[static_cast<std::size_t>(*api)].start_ns);
    if (range < 0) return kUnattributed;
    const std::string& path = a.range_paths[static_cast<std::size_t>(range)];
    return path.empty() ? kStepOp : path;
  };

  for (const KernelRecord& k : gpu->kernels) {
    int api = -1;
    bool by_node = false;
    std::string op = op_of(k.graph_node, k.correlation, &api, &by_node);
    const bool inside = launched_in_step(api, k.start_ns);
    if (inside) {
      OpTime& t = a.ops[op];
      ++t.kernels;
      t.gpu_ns += k.duration_ns();
      if (k.graph_node != 0) ++a.graph_kernels;
    }
    a.kernel_in_step.push_back(inside);
    a.kernel_ops.push_back(std::move(op));
    a.kernel_api.push_back(api);
    a.kernel_by_graph_node.push_back(by_node);
  }
  for (const TransferRecord& x : gpu->transfers) {
    int api = -1;
    bool by_node = false;
    std::string op = op_of(x.graph_node, x.correlation, &api, &by_node);
    const bool inside = launched_in_step(api, x.start_ns);
    if (inside) {
      OpTime& t = a.ops[op];
      ++t.transfers;
      t.gpu_ns += x.duration_ns();
    }
    a.transfer_in_step.push_back(inside);
    a.transfer_ops.push_back(std::move(op));
    a.transfer_api.push_back(api);
  }
  return a;
}

}  // namespace tinyllama::prof
