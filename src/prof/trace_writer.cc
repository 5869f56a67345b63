#include "prof/trace_writer.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "prof/communication.h"
#include "prof/kernel_stats.h"

namespace tinyllama::prof {
namespace {

using nlohmann::json;

constexpr int kHostPid = 1;
constexpr int kOpsTid = 1;
constexpr int kApiTid = 2;
constexpr int kGpuPidBase = 10;  // GPU d is process kGpuPidBase + d

json metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// A GPU record's slice as drawn: [start, end] in ns.
struct Shown {
  std::int64_t start = 0;
  std::int64_t end = 0;
};

// Range categories by depth: what a reader filters on in Perfetto.
const char* range_category(const HostRange& r) {
  if (r.depth == 0) return "step";
  if (r.depth == 1) return "phase";
  const std::string name = r.name;
  if (name.rfind("layer", 0) == 0) return "layer";
  return "op";
}

// Where each profiled GPU record is drawn. Perfetto drops a slice that
// starts inside its predecessor on the same track and ends after it, and a
// kernel can start a few tens of ns before the previous one on its stream
// ends (programmatic dependent launch in library kernels, the granularity of
// the timestamps). Such a start is drawn at the previous end; its true start
// stays in the slice's args.
void place_records(const GpuActivity& g, const Attribution& a, std::vector<Shown>& kernel_shown,
                   std::vector<Shown>& transfer_shown) {
  struct Item {
    std::uint32_t device, stream;
    std::int64_t start, end;
    Shown* shown;
  };
  std::vector<Item> items;
  for (std::size_t i = 0; i < g.kernels.size(); ++i) {
    if (!a.kernel_in_step[i]) continue;
    const KernelRecord& k = g.kernels[i];
    items.push_back({k.device, k.stream, k.start_ns, k.end_ns, &kernel_shown[i]});
  }
  for (std::size_t i = 0; i < g.transfers.size(); ++i) {
    if (!a.transfer_in_step[i]) continue;
    const TransferRecord& x = g.transfers[i];
    items.push_back({x.device, x.stream, x.start_ns, x.end_ns, &transfer_shown[i]});
  }
  std::sort(items.begin(), items.end(), [](const Item& l, const Item& r) {
    return std::tie(l.device, l.stream, l.start) < std::tie(r.device, r.stream, r.start);
  });
  for (std::size_t j = 0; j < items.size(); ++j) {
    const bool same_track =
        j > 0 && items[j - 1].device == items[j].device && items[j - 1].stream == items[j].stream;
    const std::int64_t floor = same_track ? items[j - 1].shown->end : items[j].start;
    const std::int64_t start = std::max(items[j].start, floor);
    *items[j].shown = Shown{start, std::max(items[j].end, start)};
  }
}

// The trace's events, appended track by track.
class TraceEvents {
 public:
  TraceEvents(const ProfileInputs& in, const Attribution& a) : in_(in), a_(a) {
    // Times are microseconds (the format's unit) from the first profiled
    // range, kept to the nanosecond.
    if (!a.steps.empty()) {
      origin_ = in.ranges[static_cast<std::size_t>(a.steps.front())].start_ns;
      window_end_ = in.ranges[static_cast<std::size_t>(a.steps.back())].end_ns;
    } else if (!in.ranges.empty()) {
      origin_ = in.ranges.front().start_ns;
    }
  }

  json take() { return std::move(events_); }

  void host_ranges() {
    events_.push_back(metadata("process_name", kHostPid, 0, "tinyllama host"));
    events_.push_back(
        metadata("thread_name", kHostPid, kOpsTid, "ops (step > phase > layer > op)"));
    for (std::size_t i = 0; i < in_.ranges.size(); ++i) {
      const HostRange& r = in_.ranges[i];
      if (r.end_ns < r.start_ns) continue;  // never closed
      json args = {{"path", a_.range_paths[i].empty() ? "step" : a_.range_paths[i]}};
      if (const OpCost* c = in_.cost.find(a_.range_paths[i])) {
        args["flops"] = c->flops;
        args["bytes"] = c->bytes;
        args["kind"] = op_kind_name(c->kind);
      }
      events_.push_back({{"ph", "X"},
                         {"name", r.name},
                         {"cat", range_category(r)},
                         {"pid", kHostPid},
                         {"tid", kOpsTid},
                         {"ts", us(r.start_ns)},
                         {"dur", dur(r.start_ns, r.end_ns)},
                         {"args", args}});
    }
  }

  // API calls: those that launched profiled GPU work, and any other call
  // made during the profiled steps (synchronisations, event records).
  void api_calls(const GpuActivity& g) {
    events_.push_back(metadata("thread_name", kHostPid, kApiTid, "CUDA API"));
    std::set<int> apis;
    for (std::size_t i = 0; i < g.kernels.size(); ++i) {
      if (a_.kernel_in_step[i] && a_.kernel_api[i] >= 0) apis.insert(a_.kernel_api[i]);
    }
    for (std::size_t i = 0; i < g.transfers.size(); ++i) {
      if (a_.transfer_in_step[i] && a_.transfer_api[i] >= 0) apis.insert(a_.transfer_api[i]);
    }
    for (std::size_t i = 0; i < g.api_calls.size(); ++i) {
      const ApiRecord& c = g.api_calls[i];
      if (c.start_ns >= origin_ && c.end_ns <= window_end_) apis.insert(static_cast<int>(i));
    }
    for (int i : apis) {
      const ApiRecord& c = g.api_calls[static_cast<std::size_t>(i)];
      events_.push_back({{"ph", "X"},
                         {"name", c.name},
                         {"cat", "cuda_api"},
                         {"pid", kHostPid},
                         {"tid", kApiTid},
                         {"ts", us(c.start_ns)},
                         {"dur", dur(c.start_ns, c.end_ns)},
                         {"args", {{"correlation", c.correlation}}}});
    }
  }

  // The profiled kernels and copies, on one track per (device, stream),
  // each with the flow from what launched it.
  void gpu_records(const GpuActivity& g) {
    std::vector<Shown> kernel_shown(g.kernels.size()), transfer_shown(g.transfers.size());
    place_records(g, a_, kernel_shown, transfer_shown);
    kernels(g, kernel_shown);
    transfers(g, transfer_shown);
    std::set<std::uint32_t> devices;
    for (const auto& [device, stream] : streams_) {
      devices.insert(device);
      events_.push_back(metadata("thread_name", kGpuPidBase + static_cast<int>(device),
                                 static_cast<int>(stream), "stream " + std::to_string(stream)));
    }
    for (std::uint32_t device : devices) {
      events_.push_back(metadata("process_name", kGpuPidBase + static_cast<int>(device), 0,
                                 "GPU " + std::to_string(device) + ": " + in_.device));
    }
  }

 private:
  double us(std::int64_t ns) const { return static_cast<double>(ns - origin_) / 1e3; }
  static double dur(std::int64_t from, std::int64_t to) {
    return static_cast<double>(std::max<std::int64_t>(to - from, 0)) / 1e3;
  }

  // A record drawn later than it started keeps its true times in its args.
  void keep_true_times(json& args, const Shown& shown, std::int64_t start, std::int64_t end) const {
    if (shown.start == start) return;
    args["true_start_us"] = us(start);
    args["true_duration_us"] = dur(start, end);
  }

  // One flow per GPU record: a graph launch fans out to many kernels, and
  // a flow has exactly one start and one end. It starts at the API call
  // that launched the record, or, for a record placed by the learnt launch
  // order (no API call recorded), at the op range that launched it.
  void flow(const GpuActivity& g, int api, int range, std::uint32_t device, std::uint32_t stream,
            std::int64_t start) {
    if (api < 0 && range < 0) return;
    ++flow_id_;
    events_.push_back(
        {{"ph", "s"},
         {"id", flow_id_},
         {"name", "launch"},
         {"cat", "launch"},
         {"pid", kHostPid},
         {"tid", api >= 0 ? kApiTid : kOpsTid},
         // At the call's (range's) start: a graph launch's
         // first kernels begin while the call is still
         // returning, so a later point could put the arrow's
         // tail after its head.
         {"ts", us(api >= 0 ? g.api_calls[static_cast<std::size_t>(api)].start_ns
                            : in_.ranges[static_cast<std::size_t>(range)].start_ns)}});
    events_.push_back({{"ph", "f"},
                       {"bp", "e"},
                       {"id", flow_id_},
                       {"name", "launch"},
                       {"cat", "launch"},
                       {"pid", kGpuPidBase + static_cast<int>(device)},
                       {"tid", stream},
                       {"ts", us(start)}});
  }

  void kernels(const GpuActivity& g, const std::vector<Shown>& kernel_shown) {
    std::map<std::string, std::string> readable;
    // NCCL's kernels say how much of them compute on another stream hid.
    const std::vector<bool> communication = communication_kernels(g.kernels);
    const std::vector<std::int64_t> hidden = hidden_behind_compute(g.kernels, communication);
    for (std::size_t i = 0; i < g.kernels.size(); ++i) {
      if (!a_.kernel_in_step[i]) continue;
      const KernelRecord& k = g.kernels[i];
      const Shown& shown = kernel_shown[i];
      auto it = readable.find(k.name);
      if (it == readable.end()) it = readable.emplace(k.name, demangle(k.name)).first;
      streams_.emplace(k.device, k.stream);
      json args = {{"correlation", k.correlation},
                   {"op", a_.kernel_ops[i]},
                   {"grid", k.grid},
                   {"block", k.block}};
      if (k.graph_node != 0) {
        args["graph_id"] = k.graph_id;
        args["graph_node"] = k.graph_node;
      }
      if (communication[i]) args["hidden_behind_compute_us"] = static_cast<double>(hidden[i]) / 1e3;
      keep_true_times(args, shown, k.start_ns, k.end_ns);
      gpu_event(it->second, "kernel", k.device, k.stream, shown, std::move(args));
      flow(g, a_.kernel_api[i], a_.kernel_range[i], k.device, k.stream, shown.start);
    }
  }

  // One kernel, copy or memset on its device's stream track, where it is drawn.
  void gpu_event(const std::string& name, const char* category, std::uint32_t device,
                 std::uint32_t stream, const Shown& shown, json args) {
    events_.push_back({{"ph", "X"},
                       {"name", name},
                       {"cat", category},
                       {"pid", kGpuPidBase + static_cast<int>(device)},
                       {"tid", stream},
                       {"ts", us(shown.start)},
                       {"dur", dur(shown.start, shown.end)},
                       {"args", std::move(args)}});
  }

  void transfers(const GpuActivity& g, const std::vector<Shown>& transfer_shown) {
    for (std::size_t i = 0; i < g.transfers.size(); ++i) {
      if (!a_.transfer_in_step[i]) continue;
      const TransferRecord& x = g.transfers[i];
      const Shown& shown = transfer_shown[i];
      streams_.emplace(x.device, x.stream);
      json args = {{"correlation", x.correlation}, {"bytes", x.bytes}, {"op", a_.transfer_ops[i]}};
      keep_true_times(args, shown, x.start_ns, x.end_ns);
      gpu_event(x.name, x.name == "memset" ? "memset" : "memcpy", x.device, x.stream, shown,
                std::move(args));
      flow(g, a_.transfer_api[i], a_.transfer_range[i], x.device, x.stream, shown.start);
    }
  }

  const ProfileInputs& in_;
  const Attribution& a_;
  std::int64_t origin_ = 0;
  std::int64_t window_end_ = 0;
  json events_ = json::array();
  long long flow_id_ = 0;
  std::set<std::pair<std::uint32_t, std::uint32_t>> streams_;  // (device, stream)
};

}  // namespace

json chrome_trace(const ProfileInputs& in, const Attribution& a) {
  TraceEvents events(in, a);
  events.host_ranges();
  if (in.gpu != nullptr) {
    events.api_calls(*in.gpu);
    events.gpu_records(*in.gpu);
  }
  // No "displayTimeUnit": some Perfetto versions read it as the unit of
  // "ts" itself, which would scale the whole trace by 1000.
  return {{"traceEvents", events.take()},
          {"otherData",
           {{"tool", "tinyllama --profile"},
            {"device", in.device},
            {"level", in.plan.level},
            {"profiled_steps", a.steps.size()},
            {"clock", "steady clock, microseconds from the first profiled step"}}}};
}

}  // namespace tinyllama::prof
