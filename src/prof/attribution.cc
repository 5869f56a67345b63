#include "prof/attribution.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "prof/overlap.h"

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

namespace {

// Where the learnt launch order puts one record: its host range, or -1.
struct OrderedPlacement {
  std::vector<int> kernel_range;    // per kernel: -2 not placed, -1 after the profiled steps
  std::vector<int> transfer_range;  // likewise per transfer
};

// The eager records without an API call, in launch (correlation id) order,
// must be the learnt step's launches once per profiled step, names and ops
// alike; then each takes its launch's range. Records after the profiled
// steps' share were launched by the next, unprofiled step. Returns false,
// with *why, when the records do not follow the order.
bool place_by_launch_order(const LaunchOrder& order, const Attribution& a, const GpuActivity& gpu,
                           const std::unordered_map<std::uint32_t, int>& api_by_correlation,
                           OrderedPlacement* out, std::string* why) {
  struct Rec {
    std::uint32_t correlation;
    bool kernel;
    std::size_t index;
  };
  std::vector<Rec> recs;
  // Kernels and copies alike: those neither replayed nor with an API call.
  auto gather = [&](const auto& records, bool kernel) {
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (records[i].graph_node == 0 &&
          api_by_correlation.find(records[i].correlation) == api_by_correlation.end()) {
        recs.push_back({records[i].correlation, kernel, i});
      }
    }
  };
  gather(gpu.kernels, true);
  gather(gpu.transfers, false);
  std::sort(recs.begin(), recs.end(),
            [](const Rec& x, const Rec& y) { return x.correlation < y.correlation; });
  const std::size_t per_step = order.launches.size();
  const std::size_t expected = per_step * a.steps.size();
  if (per_step == 0 || recs.size() < expected) {
    *why = std::to_string(recs.size()) + " records for " + std::to_string(a.steps.size()) +
           " steps of " + std::to_string(per_step) + " launches";
    return false;
  }
  out->kernel_range.assign(gpu.kernels.size(), -2);
  out->transfer_range.assign(gpu.transfers.size(), -2);
  for (std::size_t p = 0; p < recs.size(); ++p) {
    const Rec& r = recs[p];
    int range = -1;
    if (p < expected) {
      const LaunchOrder::Launch& l = order.launches[p % per_step];
      const std::string& name = r.kernel ? gpu.kernels[r.index].name : gpu.transfers[r.index].name;
      const long long at = static_cast<long long>(a.steps[p / per_step]) + l.range_offset;
      if (r.kernel != l.kernel || name != l.name || at < 0 ||
          at >= static_cast<long long>(a.range_paths.size()) ||
          a.range_paths[static_cast<std::size_t>(at)] != l.op) {
        *why = "launch " + std::to_string(p % per_step + 1) + " of profiled step " +
               std::to_string(p / per_step + 1) + " is " + name + ", the learnt step's was " +
               l.name + " in " + (l.op.empty() ? std::string(kStepOp) : l.op);
        return false;
      }
      range = static_cast<int>(at);
    }
    (r.kernel ? out->kernel_range[r.index] : out->transfer_range[r.index]) = range;
  }
  return true;
}

// The host ranges' paths, the profiled steps and each op's host time.
void attribute_host_ranges(const std::vector<HostRange>& ranges, Attribution& a) {
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
}

// Where one GPU record goes: its op, the API call that launched it and its
// host range (-1 when none), and whether a profiled step launched it.
struct Placement {
  std::string op;
  int api = -1;
  int range = -1;
  bool by_node = false;
  bool inside = false;
};

// Places GPU records on the host ranges that launched them.
class RecordPlacer {
 public:
  RecordPlacer(const std::vector<HostRange>& ranges, const GpuActivity& gpu,
               const LaunchOrder* order, Attribution& a)
      : ranges_(ranges), gpu_(gpu), a_(a), finder_(ranges) {
    for (std::size_t i = 0; i < gpu.api_calls.size(); ++i) {
      api_by_correlation_.emplace(gpu.api_calls[i].correlation, static_cast<int>(i));
    }
    if (order != nullptr && !place_by_launch_order(*order, a, gpu, api_by_correlation_, &placed_,
                                                   &a.launch_order_note)) {
      placed_ = {};
      a.launch_order_note =
          "the profiled steps did not launch their work in the order learnt "
          "from the warm-up (" +
          a.launch_order_note +
          "): records without a launch record are counted by start time and "
          "listed as " +
          kUnattributed;
    }
  }

  const OrderedPlacement& ordered() const { return placed_; }

  // Placed by the launch order (-1: launched after the profiled steps), or
  // by its API call, graph node or start time.
  Placement place(const std::vector<int>& ordered, std::size_t i, std::uint64_t graph_node,
                  std::uint32_t correlation, std::int64_t start_ns) {
    Placement p;
    if (!ordered.empty() && ordered[i] != -2) {
      p.range = ordered[i];
      p.inside = p.range >= 0;
      if (p.inside) ++a_.by_launch_order;
      p.op = p.inside ? path_of(p.range) : kUnattributed;
      return p;
    }
    p.op = op_of(graph_node, correlation, p);
    p.inside = launched_in_step(p.api, start_ns);
    return p;
  }

 private:
  bool in_step(std::int64_t t) const {
    const int i = finder_.innermost(t);
    if (i < 0) return false;
    int root = i;
    while (ranges_[static_cast<std::size_t>(root)].parent >= 0) {
      root = ranges_[static_cast<std::size_t>(root)].parent;
    }
    return std::find(a_.steps.begin(), a_.steps.end(), root) != a_.steps.end();
  }

  // A record belongs to the step whose host range launched it: the trainer
  // enqueues steps ahead, so a kernel often runs after its step's range has
  // closed, while the next step is being launched. Without its API record,
  // the record's own start time decides.
  bool launched_in_step(int api, std::int64_t start_ns) const {
    return in_step(api >= 0 ? gpu_.api_calls[static_cast<std::size_t>(api)].start_ns : start_ns);
  }

  std::string path_of(int range) const {
    const std::string& path = a_.range_paths[static_cast<std::size_t>(range)];
    return path.empty() ? kStepOp : path;
  }

  // The op of one GPU record; sets the API call that launched it and its range.
  std::string op_of(std::uint64_t graph_node, std::uint32_t correlation, Placement& p) const {
    const auto c = api_by_correlation_.find(correlation);
    p.api = c != api_by_correlation_.end() ? c->second : -1;
    p.range = -1;
    p.by_node = false;
    if (graph_node != 0) {
      const auto tag = gpu_.graph_node_ops.find(graph_node);
      if (tag != gpu_.graph_node_ops.end()) {
        p.by_node = true;
        const std::string path = strip_step(tag->second);
        return path.empty() ? kStepOp : path;
      }
    }
    if (p.api < 0) return kUnattributed;
    p.range = finder_.innermost(gpu_.api_calls[static_cast<std::size_t>(p.api)].start_ns);
    if (p.range < 0) return kUnattributed;
    return path_of(p.range);
  }

  const std::vector<HostRange>& ranges_;
  const GpuActivity& gpu_;
  Attribution& a_;
  const RangeFinder finder_;
  std::unordered_map<std::uint32_t, int> api_by_correlation_;
  OrderedPlacement placed_;
};

void attribute_kernels(const GpuActivity& gpu, RecordPlacer& placer, Attribution& a) {
  const std::vector<std::int64_t> beside = time_beside_other_streams(gpu.kernels);
  for (std::size_t i = 0; i < gpu.kernels.size(); ++i) {
    const KernelRecord& k = gpu.kernels[i];
    Placement p =
        placer.place(placer.ordered().kernel_range, i, k.graph_node, k.correlation, k.start_ns);
    if (p.inside) {
      OpTime& t = a.ops[p.op];
      ++t.kernels;
      t.gpu_ns += k.duration_ns();
      t.beside_ns += beside[i];
      if (k.graph_node != 0) ++a.graph_kernels;
    }
    a.kernel_in_step.push_back(p.inside);
    a.kernel_ops.push_back(std::move(p.op));
    a.kernel_api.push_back(p.api);
    a.kernel_range.push_back(p.range);
    a.kernel_by_graph_node.push_back(p.by_node);
  }
}

void attribute_transfers(const GpuActivity& gpu, RecordPlacer& placer, Attribution& a) {
  for (std::size_t i = 0; i < gpu.transfers.size(); ++i) {
    const TransferRecord& x = gpu.transfers[i];
    Placement p =
        placer.place(placer.ordered().transfer_range, i, x.graph_node, x.correlation, x.start_ns);
    if (p.inside) {
      OpTime& t = a.ops[p.op];
      ++t.transfers;
      t.gpu_ns += x.duration_ns();
    }
    a.transfer_in_step.push_back(p.inside);
    a.transfer_ops.push_back(std::move(p.op));
    a.transfer_api.push_back(p.api);
    a.transfer_range.push_back(p.range);
  }
}

}  // namespace

Attribution attribute(const std::vector<HostRange>& ranges, const GpuActivity* gpu,
                      const LaunchOrder* order) {
  Attribution a;
  attribute_host_ranges(ranges, a);
  if (gpu == nullptr) return a;
  RecordPlacer placer(ranges, *gpu, order, a);
  attribute_kernels(*gpu, placer, a);
  attribute_transfers(*gpu, placer, a);
  return a;
}

}  // namespace tinyllama::prof
