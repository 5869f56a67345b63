#include "prof/memory_timeline.h"

#include <algorithm>
#include <stdexcept>

#include "prof/traced_step.h"

namespace tinyllama::prof {
namespace {

// What one op did to one buffer.
struct Touch {
  bool read = false;
  bool write = false;
  // Unions of the written rows that span every column, and of the written
  // columns (in bytes) that span every row: either covering the buffer
  // makes the write a full one.
  std::vector<std::pair<std::int64_t, std::int64_t>> full_width_rows;
  std::vector<std::pair<std::int64_t, std::int64_t>> full_height_cols;
};

bool covers(std::vector<std::pair<std::int64_t, std::int64_t>> ranges, std::int64_t extent) {
  std::sort(ranges.begin(), ranges.end());
  std::int64_t reach = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin > reach) return false;
    reach = std::max(reach, end);
  }
  return reach >= extent;
}

// Whether op `name` is inside a layer's backward ("backward/layer3/swiglu"):
// the only ops that touch the scratch laid over the logits.
bool in_layer_backward(const std::string& name) {
  return name.rfind("backward/layer", 0) == 0;
}

// The buffer (index into `buffers`) holding arena byte `at`, or -1. Where
// the scratch lies over the buffers dead by then, an op inside a layer's
// backward touches the scratch and any other op what lies under it.
int buffer_at(const std::vector<ActivationBuffer>& buffers, std::int64_t at, bool layer_backward) {
  int found = -1;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const ActivationBuffer& b = buffers[i];
    if (at < b.slot.offset || at >= b.slot.offset + b.bytes) continue;
    if (found < 0 || b.over_logits == layer_backward) found = static_cast<int>(i);
  }
  return found;
}

void note_write(Touch& t, const ActivationBuffer& b, std::int64_t rel, const MemoryAccess& a) {
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(b.slot.dtype));
  const std::int64_t stride = b.slot.ld * es;
  const std::int64_t row0 = rel / stride;
  const std::int64_t col0 = rel % stride;
  if (col0 == 0 && a.row_bytes >= b.slot.cols * es) {
    t.full_width_rows.emplace_back(row0, row0 + a.rows);
  }
  if (row0 == 0 && a.rows >= b.slot.rows) t.full_height_cols.emplace_back(col0, col0 + a.row_bytes);
}

bool full_write(const Touch& t, const ActivationBuffer& b) {
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(b.slot.dtype));
  return covers(t.full_width_rows, b.slot.rows) || covers(t.full_height_cols, b.slot.cols * es);
}

std::string phase_of(const std::string& path) {
  return path.substr(0, path.find('/'));
}

}  // namespace

bool TimelineBuffer::live_at(int op) const {
  for (const auto& [first, last] : lifetimes) {
    if (first <= op && op <= last) return true;
  }
  return false;
}

std::vector<std::string> MemoryTimeline::kinds() const {
  std::vector<std::string> out;
  auto present = [&](const std::string& kind) {
    return std::any_of(buffers.begin(), buffers.end(),
                       [&](const TimelineBuffer& b) { return b.kind == kind; });
  };
  for (const char* kind : kActivationKinds) {
    if (present(kind)) out.emplace_back(kind);
  }
  if (present("tokens")) out.emplace_back("tokens");
  return out;
}

std::vector<std::int64_t> MemoryTimeline::live_by_kind(int op) const {
  const std::vector<std::string> names = kinds();
  std::vector<std::int64_t> out(names.size(), 0);
  for (const TimelineBuffer& b : buffers) {
    if (!b.live_at(op)) continue;
    const auto k = std::find(names.begin(), names.end(), b.kind) - names.begin();
    out[static_cast<std::size_t>(k)] += b.bytes;
  }
  return out;
}

MemoryTimeline analyse_accesses(const std::vector<TracedOp>& ops, const char* arena,
                                const std::vector<ActivationBuffer>& buffers,
                                std::vector<TimelineBuffer> extra) {
  const int n_ops = static_cast<int>(ops.size());
  const std::size_t n_buf = buffers.size();
  std::int64_t arena_bytes = 0;
  for (const ActivationBuffer& b : buffers) {
    arena_bytes = std::max(arena_bytes, b.slot.offset + b.bytes);
  }
  // touches[op][buffer]
  std::vector<std::vector<Touch>> touches(ops.size(), std::vector<Touch>(n_buf));
  for (int i = 0; i < n_ops; ++i) {
    for (const MemoryAccess& a : ops[static_cast<std::size_t>(i)].accesses) {
      const std::int64_t rel = a.data - arena;
      if (rel < 0 || rel >= arena_bytes) continue;  // parameters, gradients, state
      const int bi =
          buffer_at(buffers, rel, in_layer_backward(ops[static_cast<std::size_t>(i)].name));
      if (bi < 0) throw std::logic_error("memory timeline: an access between arena buffers");
      const ActivationBuffer& b = buffers[static_cast<std::size_t>(bi)];
      const std::int64_t end = rel + (a.rows - 1) * a.stride_bytes + a.row_bytes;
      if (end > b.slot.offset + b.bytes) {
        throw std::logic_error("memory timeline: " + ops[static_cast<std::size_t>(i)].name +
                               " reaches past " + b.name);
      }
      Touch& t = touches[static_cast<std::size_t>(i)][static_cast<std::size_t>(bi)];
      if (a.write) {
        t.write = true;
        note_write(t, b, rel - b.slot.offset, a);
      } else {
        t.read = true;
      }
    }
  }

  MemoryTimeline tl;
  tl.arena_bytes = arena_bytes;
  for (const ActivationBuffer& b : buffers) tl.shared_bytes += b.bytes;
  tl.shared_bytes -= arena_bytes;
  for (std::size_t bi = 0; bi < n_buf; ++bi) {
    const ActivationBuffer& b = buffers[bi];
    std::vector<bool> live(ops.size(), false);
    // Backwards: whether a later op reads what the buffer holds.
    bool needed_after = false;
    for (int i = n_ops - 1; i >= 0; --i) {
      const Touch& t = touches[static_cast<std::size_t>(i)][bi];
      live[static_cast<std::size_t>(i)] = t.read || t.write || needed_after;
      needed_after = t.read || (needed_after && !(t.write && full_write(t, b)));
    }
    // Forwards: nothing is live before the step first writes it.
    bool written = false;
    for (int i = 0; i < n_ops; ++i) {
      const Touch& t = touches[static_cast<std::size_t>(i)][bi];
      if (!t.read && !t.write && !written) live[static_cast<std::size_t>(i)] = false;
      written = written || t.write;
    }
    TimelineBuffer out{b.name, b.kind, b.slot.offset, b.bytes, {}};
    for (int i = 0; i < n_ops; ++i) {
      if (!live[static_cast<std::size_t>(i)]) continue;
      if (!out.lifetimes.empty() && out.lifetimes.back().second == i - 1) {
        out.lifetimes.back().second = i;
      } else {
        out.lifetimes.emplace_back(i, i);
      }
    }
    tl.buffers.push_back(std::move(out));
  }
  for (TimelineBuffer& b : extra) {
    b.lifetimes = {{0, n_ops - 1}};
    tl.buffers.push_back(std::move(b));
  }
  for (int i = 0; i < n_ops; ++i) {
    TimelineOp op{ops[static_cast<std::size_t>(i)].name,
                  phase_of(ops[static_cast<std::size_t>(i)].name), 0};
    for (const TimelineBuffer& b : tl.buffers) op.live_bytes += b.live_at(i) ? b.bytes : 0;
    if (op.live_bytes > tl.peak_live_bytes) {
      tl.peak_live_bytes = op.live_bytes;
      tl.peak_op = i;
    }
    tl.ops.push_back(std::move(op));
  }
  return tl;
}

MemoryTimeline trace_memory_timeline(const ModelConfig& cfg, BatchShape shape,
                                     const StepPlan& plan) {
  // One rank's step: the arena does not depend on the ranks, and the
  // gradient exchange touches no activation.
  StepPlan single = plan;
  single.parallel = DataParallel{};
  AccessTraceBackend backend(DeviceCaps::cpu());
  Model model(cfg, shape, single, backend);
  trace_step(model, backend, plan.loss_scaling == LossScaling::Dynamic, 1);
  {
    // Then, as StepRunner, the loss readback.
    const AccessTraceBackend::Recording recording(backend);
    const std::unique_ptr<HostReadback> readback = backend.make_readback(model.losses_bytes());
    const OpScope op("loss_readback");
    model.enqueue_loss_readback(*readback);
  }
  const ActivationPlan acts(cfg, shape, single);
  const std::int64_t token_bytes = shape.tokens() * static_cast<std::int64_t>(sizeof(std::int32_t));
  std::vector<TimelineBuffer> ids{{"tokens", "tokens", -1, token_bytes, {}},
                                  {"targets", "tokens", -1, token_bytes, {}}};
  MemoryTimeline tl = analyse_accesses(
      backend.ops(), static_cast<const char*>(model.activation_arena()), acts.buffers(), ids);
  tl.allocated = Model::estimate_memory(cfg, shape, plan);
  return tl;
}

}  // namespace tinyllama::prof
