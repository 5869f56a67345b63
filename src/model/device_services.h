#pragma once
// What running a step on a device needs besides the ops: which device it
// is, its workspaces and memory, timers and readbacks, whole-step graphs,
// and the joins and forks that order the side streams against the main
// one. Kept apart from the ops (model/step_ops.h) because none of it is
// math: the trainer's step runner, the memory check and the device runtime
// (device) use these services whatever the ops compute, and an op
// added to a backend changes nothing here.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model/config.h"
#include "model/step_plan.h"

namespace tinyllama {

// What one captured graph holds, by node type. Kernel nodes are the kernel
// launches of the captured work, library kernels (cuBLASLt) included.
struct GraphStats {
  int kernels = 0;
  int memsets = 0;
  int memcpys = 0;
  int other = 0;  // event records (timing marks), empty and host nodes
  int total() const { return kernels + memsets + memcpys + other; }
};

// Marks points in the backend's stream of work and reports the time between
// them: CUDA events on the GPU, a steady clock on the CPU. Recording never
// blocks; elapsed_ms waits for the later mark to complete.
class EventTimer {
 public:
  virtual ~EventTimer() = default;
  virtual void record(int mark) = 0;
  virtual double elapsed_ms(int from_mark, int to_mark) = 0;
};

// A host copy of device results taken in stream order, so a step's loss can
// be read after later steps have been enqueued (they may overwrite the
// device buffer; this copy was taken before they ran).
class HostReadback {
 public:
  virtual ~HostReadback() = default;
  // Enqueues a copy of `bytes` (at most the readback's size) from backend
  // memory, after the work enqueued so far. Not inside a captured region.
  virtual void copy_from(const void* src, std::size_t bytes) = 0;
  // Waits for the latest copy and returns its bytes.
  virtual const void* wait() = 0;
};

// Whole-step graphs kept at once: one per step in flight, each recording its
// step's timing marks (two steps overlap at most: the next one is enqueued
// while the host reads back the last one).
constexpr int kGraphSlots = 2;

class DeviceServices {
 public:
  virtual ~DeviceServices() = default;
  virtual std::string name() const = 0;
  // One line: the device's name and size.
  virtual std::string device_description() const = 0;

  // What the device can do; resolve_plan() reads it.
  virtual DeviceCaps caps() const = 0;
  // Called once, before step 1, with the resolved plan: it sizes the
  // backend's own workspaces (plan.workspaces: GEMM workspace, attention
  // scratch), so that no op allocates, and says whether the weight-gradient
  // GEMMs and per-layer sweeps run on parallel branches.
  virtual void prepare(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) = 0;
  // Bytes of those workspaces: plan.workspace_bytes() after prepare().
  virtual std::int64_t workspace_bytes() const = 0;
  // The most memory in use on the device, as the driver counts it (every
  // allocation of the process, libraries' included), over the calls so far:
  // a sample per call, so a peak between calls is missed (the trainer calls
  // it after every step, and no step allocates); -1 if unknown.
  virtual std::int64_t device_peak_used_bytes() = 0;
  virtual std::unique_ptr<EventTimer> make_timer(int marks) = 0;
  // Choices the backend made by timing (GEMM algorithms), as text for a
  // checkpoint, and their restoration before a resumed run's first step, so
  // that it rounds as the uninterrupted run did. "" from restore, or why
  // nothing was restored. The defaults: nothing chosen by timing.
  virtual std::string tuning_state() const { return ""; }
  virtual std::string restore_tuning_state(const std::string& /*text*/) { return ""; }
  // A readback of up to `bytes`; the default copies synchronously (download).
  virtual std::unique_ptr<HostReadback> make_readback(std::size_t bytes);

  // --- memory (setup time only) -------------------------------------------
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;
  // Stream-ordered, so it may also run inside a step (the overflow flag).
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;
  virtual void synchronize() {}
  // Per-step inputs (the batch, the step's scalars): a stream-ordered copy
  // from host memory that does not wait for the device. host_src may be
  // reused as soon as the call returns (the backend stages the bytes). Not
  // inside a captured region: the graph would replay the staged bytes of
  // the capture.
  virtual void upload_async(void* dst, const void* host_src, std::size_t bytes) = 0;

  // --- whole-step graphs ------------------------------------------------------
  // A backend that can record the work it is given once and replay it with
  // one launch (CUDA graphs). Recording runs nothing: between begin_capture
  // and end_capture every op is only recorded, so an op that synchronises
  // with the host or allocates fails the capture.
  virtual bool supports_graphs() const { return false; }
  // Starts recording the backend's stream. Throws RuntimeFailure.
  virtual void begin_capture();
  // Stops recording. With instantiate, the recording becomes the graph that
  // replay(slot) launches (replacing any earlier one in that slot, 0 <= slot
  // < kGraphSlots); without, it is only counted and discarded. Throws
  // RuntimeFailure naming the cause, after discarding the recording and
  // clearing the device's error state, so the caller can go on eagerly.
  virtual GraphStats end_capture(bool instantiate, int slot);
  // Discards a recording left open by an exception inside it and clears the
  // error state; does nothing when no recording is open. Never throws.
  virtual void abort_capture() noexcept {}
  // Enqueues the graph instantiated in `slot` once. Throws RuntimeFailure.
  virtual void replay(int slot);

  // --- side streams: forks and joins (the side ops are StepOps') ------------
  // The point side_gemm_from_fork() starts after: the ops issued before this
  // call.
  virtual void fork_side_gemms() {}
  // Orders every op issued after this call after the side GEMM `ticket`
  // (and all side GEMMs issued before it).
  virtual void join_side_gemm(std::int64_t /*ticket*/) {}
  // join_side_gemm for every side GEMM issued so far.
  virtual void join_side_gemms() {}
  // Orders every op issued after this call after the side update `ticket`
  // (and every side update issued before it): GradBuffers::Ring joins a
  // layer's sweep before the layer two below overwrites the gradient slot
  // that the sweep reads.
  virtual void join_side_update(std::int64_t /*ticket*/) {}
  // Orders every op issued after this call after every side_adamw_fused so far.
  virtual void join_side_updates() {}

  // --- collectives (model/collectives.h) ---------------------------------------
  // The stream a collective issued now runs on beside the backward pass, as
  // an opaque handle (cudaStream_t): the side-update stream, ordered after
  // every op and side GEMM issued so far and before every later
  // side_adamw_fused, joined by join_side_updates -- so a layer's gradient
  // exchange, its sweep and its weight gather run in that order while the
  // backward pass goes on. Call end_side_collective after enqueuing. The
  // defaults (a backend that runs every op at once) return nullptr.
  virtual void* begin_side_collective() { return nullptr; }
  virtual void end_side_collective() {}
  // A gradient exchange was just issued beside the backward pass: the ops
  // issued from now until join_side_updates run beside it, and the GEMMs
  // among them leave it the plan's SMs (DataParallel::gemm_sm_margin). The
  // GEMMs before the first exchange of a step (the LM head's, the last
  // layer's) and the forward pass's keep every SM.
  virtual void gemms_beside_exchange() {}
  // The stream every other op runs on, as an opaque handle; nullptr by default.
  virtual void* main_stream_handle() { return nullptr; }
};

}  // namespace tinyllama
