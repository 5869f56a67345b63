#include "prof/cupti_collector.h"

#include <utility>

#if defined(TINYLLAMA_HAS_CUDA)

#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace tinyllama::prof {

struct CuptiCollector::State {
  const HostRangeRecorder* ranges = nullptr;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<CUpti_ActivityKind> enabled;
  // CUPTI timestamp minus host_now_ns(); 0 when CUPTI took our clock.
  std::int64_t clock_offset_ns = 0;
  bool finished = false;

  // Buffers complete on CUPTI's own thread, graph nodes are tagged on the
  // training thread: both write under this lock.
  std::mutex mutex;
  GpuActivity activity;
  std::map<std::pair<int, std::uint32_t>, std::string> api_names;  // (domain, cbid)
};

namespace {

constexpr std::size_t kBufferBytes = std::size_t{8} << 20;
constexpr std::size_t kBufferAlign = 8;  // CUPTI's record alignment

// CUPTI calls back through free functions; one collector records at a time.
std::atomic<CuptiCollector::State*> g_state{nullptr};

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s != nullptr ? s : "CUPTI error " + std::to_string(static_cast<int>(r));
}

// Host ranges and GPU records on one clock: CUPTI asks us for timestamps and
// converts the GPU's own timestamps to this clock itself.
std::uint64_t CUPTIAPI steady_timestamp() {
  return static_cast<std::uint64_t>(host_now_ns());
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;  // 0: CUPTI drops (and counts) records
  *max_records = 0;                               // as many as fit
}

const char* memcpy_name(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy";
  }
}

// A memcpy or memset record (the two CUPTI structs share these fields);
// `to_ns` maps CUPTI timestamps onto the profiler's clock.
template <typename CuptiRecord, typename ToNs>
TransferRecord transfer_record(const CuptiRecord& m, std::string name, const ToNs& to_ns) {
  TransferRecord r;
  r.name = std::move(name);
  r.start_ns = to_ns(m.start);
  r.end_ns = to_ns(m.end);
  r.bytes = static_cast<std::int64_t>(m.bytes);
  r.device = m.deviceId;
  r.stream = m.streamId;
  r.correlation = m.correlationId;
  r.graph_node = m.graphNodeId;
  return r;
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel".
std::string api_name(CuptiCollector::State& s, CUpti_CallbackDomain domain, std::uint32_t cbid) {
  const auto key = std::make_pair(static_cast<int>(domain), cbid);
  auto it = s.api_names.find(key);
  if (it != s.api_names.end()) return it->second;
  const char* raw = nullptr;
  std::string name = cuptiGetCallbackName(domain, cbid, &raw) == CUPTI_SUCCESS && raw != nullptr
                         ? raw
                         : "cuda api " + std::to_string(cbid);
  const auto v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size() &&
      name.find_first_not_of("0123456789", v + 2) == std::string::npos) {
    name.resize(v);
  }
  return s.api_names.emplace(key, std::move(name)).first->second;
}

// Called with s.mutex held.
void parse_record(CuptiCollector::State& s, const CUpti_Activity* record) {
  const std::int64_t off = s.clock_offset_ns;
  auto t = [off](std::uint64_t ts) { return static_cast<std::int64_t>(ts) - off; };
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      KernelRecord r;
      r.name = k->name != nullptr ? k->name : "(unnamed kernel)";
      r.start_ns = t(k->start);
      r.end_ns = t(k->end);
      r.device = k->deviceId;
      r.stream = k->streamId;
      r.correlation = k->correlationId;
      r.graph_node = k->graphNodeId;
      r.graph_id = k->graphId;
      r.grid = {k->gridX, k->gridY, k->gridZ};
      r.block = {k->blockX, k->blockY, k->blockZ};
      s.activity.kernels.push_back(std::move(r));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      s.activity.transfers.push_back(transfer_record(*m, memcpy_name(m->copyKind), t));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      s.activity.transfers.push_back(transfer_record(*m, "memset", t));
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      ApiRecord r;
      r.name = api_name(s,
                        record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                    : CUPTI_CB_DOMAIN_DRIVER_API,
                        a->cbid);
      r.start_ns = t(a->start);
      r.end_ns = t(a->end);
      r.correlation = a->correlationId;
      r.thread = a->threadId;
      s.activity.api_calls.push_back(std::move(r));
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid_size) {
  CuptiCollector::State* s = g_state.load();
  if (s != nullptr && buffer != nullptr) {
    const std::lock_guard<std::mutex> lock(s->mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      parse_record(*s, record);
    }
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
      s->activity.dropped_records += dropped;
    }
  }
  std::free(buffer);
}

// Graph nodes: tag each node created during a capture with the op range
// open at that moment; a node cloned into an executable graph (the ids that
// replayed kernels carry) inherits its original's tag.
void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || data == nullptr) return;
  auto* s = static_cast<CuptiCollector::State*>(userdata);
  const auto* resource = static_cast<const CUpti_ResourceData*>(data);
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  if (graph == nullptr) return;
  std::uint64_t node = 0;
  if (cuptiGetGraphNodeId(graph->node, &node) != CUPTI_SUCCESS) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    std::string path = s->ranges != nullptr ? s->ranges->open_path() : std::string();
    if (path.empty()) return;
    const std::lock_guard<std::mutex> lock(s->mutex);
    s->activity.graph_node_ops[node] = std::move(path);
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    std::uint64_t original = 0;
    if (cuptiGetGraphNodeId(graph->originalNode, &original) != CUPTI_SUCCESS) return;
    const std::lock_guard<std::mutex> lock(s->mutex);
    auto& ops = s->activity.graph_node_ops;
    const auto it = ops.find(original);
    if (it != ops.end()) {
      std::string path = it->second;  // copy first: inserting may rehash
      ops[node] = std::move(path);
    }
  }
}

void stop_recording(CuptiCollector::State& s) {
  for (CUpti_ActivityKind kind : s.enabled) cuptiActivityDisable(kind);
  s.enabled.clear();
  if (s.subscriber != nullptr) {
    cuptiEnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_RESOURCE);
    cuptiUnsubscribe(s.subscriber);
    s.subscriber = nullptr;
  }
}

// API calls left out of the records: queries and bookkeeping that run
// once or more per kernel launch -- cudaGetLastError after each launch,
// cuBLASLt's attribute and name queries, the capture-state checks -- and
// would otherwise be several records per kernel, each costing host time
// (docs/PROFILING.md, Overhead). Launches, copies and the host's waits are
// kept: their correlation ids tie kernels to ops, and the trace shows them.
constexpr CUpti_CallbackId kQuietRuntimeApis[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemGetInfo_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
};
constexpr CUpti_CallbackId kQuietDriverApis[] = {
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetName,
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction,
    CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetName,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetId,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
};

// After the RUNTIME and DRIVER kinds are enabled (enabling a kind again
// resets these). A call CUPTI refuses to leave out is simply recorded.
void quiet_bookkeeping_apis() {
  for (CUpti_CallbackId cbid : kQuietRuntimeApis) cuptiActivityEnableRuntimeApi(cbid, 0);
  for (CUpti_CallbackId cbid : kQuietDriverApis) cuptiActivityEnableDriverApi(cbid, 0);
}

}  // namespace

std::unique_ptr<CuptiCollector> CuptiCollector::start(const HostRangeRecorder* ranges,
                                                      std::string* why_not) {
  if (g_state.load() != nullptr) {
    *why_not = "another tinyllama profiler is already recording in this process";
    return nullptr;
  }
  auto state = std::make_unique<State>();
  state->ranges = ranges;

  // Subscribing first finds another CUPTI client (nsys, ncu, a debugger)
  // before anything is enabled: CUPTI serves one at a time.
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "tinyllama";
  params.oldSubscriberName = other;
  params.oldSubscriberSize = sizeof other;
  CUptiResult r = cuptiSubscribe_v2(&state->subscriber, on_callback, state.get(), &params);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    *why_not = std::string("another CUPTI client is attached") + (other[0] ? " (" : "") + other +
               (other[0] ? ")" : "") + "; kernel statistics come from that tool instead";
    return nullptr;
  }
  if (r != CUPTI_SUCCESS) {
    *why_not = "CUPTI could not start: " + result_text(r);
    return nullptr;
  }
  cuptiEnableCallback(1, state->subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                      CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
  cuptiEnableCallback(1, state->subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                      CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);

  // Must precede enabling any activity kind. Should CUPTI refuse, its own
  // clock is mapped onto ours by a measured offset instead.
  if (cuptiActivityRegisterTimestampCallback(steady_timestamp) != CUPTI_SUCCESS) {
    std::uint64_t cupti_now = 0;
    cuptiGetTimestamp(&cupti_now);
    state->clock_offset_ns = static_cast<std::int64_t>(cupti_now) - host_now_ns();
  }
  r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    stop_recording(*state);
    *why_not = "CUPTI activity buffers: " + result_text(r);
    return nullptr;
  }
  g_state.store(state.get());
  // Concurrent-kernel records (not KERNEL, which serialises kernels); the
  // runtime and driver API records carry the launch's correlation id and
  // host time (cuBLASLt launches through the driver API).
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                      CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                      CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
  for (CUpti_ActivityKind kind : kinds) {
    r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) {
      stop_recording(*state);
      g_state.store(nullptr);
      *why_not = "CUPTI cannot record activity kind " + std::to_string(static_cast<int>(kind)) +
                 ": " + result_text(r);
      return nullptr;
    }
    state->enabled.push_back(kind);
  }
  quiet_bookkeeping_apis();
  return std::unique_ptr<CuptiCollector>(new CuptiCollector(std::move(state)));
}

CuptiCollector::CuptiCollector(std::unique_ptr<State> state) : state_(std::move(state)) {}

CuptiCollector::~CuptiCollector() {
  if (!state_->finished) finish();
}

GpuActivity CuptiCollector::take_records() {
  cudaDeviceSynchronize();
  cudaGetLastError();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const std::lock_guard<std::mutex> lock(state_->mutex);
  GpuActivity& a = state_->activity;
  GpuActivity taken;
  taken.kernels.swap(a.kernels);
  taken.transfers.swap(a.transfers);
  taken.api_calls.swap(a.api_calls);
  taken.dropped_records = std::exchange(a.dropped_records, 0);
  return taken;
}

void CuptiCollector::record_kernels_only() {
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
    const auto it = std::find(state_->enabled.begin(), state_->enabled.end(), kind);
    if (it == state_->enabled.end()) continue;
    cuptiActivityDisable(kind);
    state_->enabled.erase(it);
  }
  // A subscriber alone, with only resource callbacks enabled, still cost an
  // eager step about 10 % on the H100 (docs/PROFILING.md, Overhead).
  if (state_->subscriber != nullptr) {
    cuptiEnableDomain(0, state_->subscriber, CUPTI_CB_DOMAIN_RESOURCE);
    cuptiUnsubscribe(state_->subscriber);
    state_->subscriber = nullptr;
  }
}

GpuActivity CuptiCollector::finish(bool detach) {
  if (state_->finished) return {};
  state_->finished = true;
  // Kernel records are complete only once the kernels are; then a forced
  // flush hands over the partly filled buffers too.
  cudaDeviceSynchronize();
  cudaGetLastError();  // a sticky error belongs to the training run, not to us
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  stop_recording(*state_);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_state.store(nullptr);
  // Disabled activity kinds leave CUPTI's launch hooks in place: a
  // host-bound eager step stayed 30 % slower after the profiled ones until
  // CUPTI was detached. Every buffer is back and nothing is enabled, so no
  // CUPTI call can race this one; a later profiler attaches it again.
  if (detach) cuptiFinalize();
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return std::move(state_->activity);
}

}  // namespace tinyllama::prof

#else  // no CUDA in this build

namespace tinyllama::prof {

struct CuptiCollector::State {
  bool finished = true;
};

std::unique_ptr<CuptiCollector> CuptiCollector::start(const HostRangeRecorder*,
                                                      std::string* why_not) {
  *why_not = "this build of tinyllama has no CUDA";
  return nullptr;
}

CuptiCollector::CuptiCollector(std::unique_ptr<State> state) : state_(std::move(state)) {}
CuptiCollector::~CuptiCollector() = default;
GpuActivity CuptiCollector::take_records() {
  return {};
}
void CuptiCollector::record_kernels_only() {}
GpuActivity CuptiCollector::finish(bool) {
  return {};
}

}  // namespace tinyllama::prof

#endif
