#include "prof/counter_collector.h"

#include <utility>

#if defined(TINYLLAMA_HAS_CUDA)

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <algorithm>
#include <cstdint>

namespace tinyllama::prof {

struct CounterCollector::State {
  std::vector<std::string> metrics;  // the names CUPTI accepted
  std::vector<std::string> refused;
  std::vector<std::uint8_t> config;
  std::vector<std::uint8_t> counter_data;
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* range = nullptr;
  bool initialized = false;  // cuptiProfilerInitialize succeeded
  std::size_t passes = 0;
  std::size_t max_ranges = 0;
  std::size_t baseline_launches = 0;  // the first ranges are the empty kernel's
  bool detach_at_stop = true;         // cuptiFinalize after this session
};

namespace {

using State = CounterCollector::State;

// CUPTI's parameter structs must be zeroed with structSize set.
template <typename Params>
Params params(std::size_t struct_size) {
  Params p{};
  p.structSize = struct_size;
  return p;
}

std::string result_name(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s != nullptr ? s : "CUPTI error " + std::to_string(static_cast<int>(r));
}

// True on success; otherwise *why is the profile's one line: the privilege
// refusal gets its own (counters.h), anything else names the call.
bool ok(CUptiResult r, const char* call, std::string* why) {
  if (r == CUPTI_SUCCESS) return true;
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
      r == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES) {
    *why = no_counter_access_line(call, result_name(r));
  } else {
    *why = std::string("hardware counters unavailable: ") + call + " returned " + result_name(r);
  }
  return false;
}

// A driver function through the runtime's entry point (the build links the
// runtime only: no libcuda at link time); null when the driver has none.
template <typename Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) !=
      cudaSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

// The runtime's current context.
bool current_context(CUcontext* ctx, std::string* why) {
  cudaFree(nullptr);  // makes sure the primary context exists
  const auto get_current = driver_function<CUresult (*)(CUcontext*)>("cuCtxGetCurrent");
  if (get_current == nullptr) {
    *why = "hardware counters unavailable: the driver has no cuCtxGetCurrent";
    return false;
  }
  return get_current(ctx) == CUDA_SUCCESS && *ctx != nullptr;
}

// An empty kernel, as PTX the driver compiles for the device at hand (the
// build's own kernels live in the ops, above this layer): under kernel
// replay its ranges read only what the replay adds (counters.h,
// net_of_replay).
constexpr const char* kEmptyKernelPtx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry tinyllama_counter_replay_baseline()\n{\n  ret;\n}\n";
constexpr std::size_t kBaselineLaunches = 3;

// Launches the empty kernel kBaselineLaunches times on the legacy stream
// (ordered after any work before the counter step); how many launched.
std::size_t launch_replay_baseline() {
  using LoadData = CUresult (*)(CUmodule*, const void*);
  using GetFunction = CUresult (*)(CUfunction*, CUmodule, const char*);
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
  using Unload = CUresult (*)(CUmodule);
  const auto load = driver_function<LoadData>("cuModuleLoadData");
  const auto get = driver_function<GetFunction>("cuModuleGetFunction");
  const auto launch = driver_function<Launch>("cuLaunchKernel");
  const auto unload = driver_function<Unload>("cuModuleUnload");
  CUmodule module = nullptr;
  CUfunction kernel = nullptr;
  if (load == nullptr || get == nullptr || launch == nullptr || unload == nullptr ||
      load(&module, kEmptyKernelPtx) != CUDA_SUCCESS) {
    return 0;
  }
  std::size_t launched = 0;
  if (get(&kernel, module, "tinyllama_counter_replay_baseline") == CUDA_SUCCESS) {
    while (launched < kBaselineLaunches &&
           launch(kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) == CUDA_SUCCESS) {
      ++launched;
    }
  }
  cudaDeviceSynchronize();
  unload(module);
  return launched;
}

bool chip_and_availability(int device, CUcontext ctx, std::string* chip,
                           std::vector<std::uint8_t>* availability, std::string* why) {
  auto support = params<CUpti_Profiler_DeviceSupported_Params>(
      CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE);
  support.cuDevice = device;
  support.api = CUPTI_PROFILER_RANGE_PROFILING;
  if (!ok(cuptiProfilerDeviceSupported(&support), "cuptiProfilerDeviceSupported", why)) {
    return false;
  }
  if (support.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    *why =
        "hardware counters unavailable: this device does not support CUPTI range profiling "
        "(virtual GPU, confidential compute, MIG or an unsupported architecture)";
    return false;
  }
  auto name = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  name.deviceIndex = static_cast<std::size_t>(device);
  if (!ok(cuptiDeviceGetChipName(&name), "cuptiDeviceGetChipName", why)) return false;
  *chip = name.pChipName;
  // Where the driver's admin-only restriction shows first.
  auto avail = params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = ctx;
  const char* call = "cuptiProfilerGetCounterAvailability";
  if (!ok(cuptiProfilerGetCounterAvailability(&avail), call, why)) return false;
  availability->assign(avail.counterAvailabilityImageSize, 0);
  avail.pCounterAvailabilityImage = availability->data();
  return ok(cuptiProfilerGetCounterAvailability(&avail), call, why);
}

// The names as C strings, for CUPTI's arrays (valid while names lives).
std::vector<const char*> c_names(const std::vector<std::string>& names) {
  std::vector<const char*> out;
  out.reserve(names.size());
  for (const std::string& n : names) out.push_back(n.c_str());
  return out;
}

bool add_metrics(CUpti_Profiler_Host_Object* host, const std::vector<std::string>& names) {
  std::vector<const char*> names_c = c_names(names);
  auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = host;
  add.ppMetricNames = names_c.data();
  add.numMetrics = names_c.size();
  return cuptiProfilerHostConfigAddMetrics(&add) == CUPTI_SUCCESS;
}

CUpti_Profiler_Host_Object* host_object(const std::string& chip,
                                        const std::vector<std::uint8_t>& availability) {
  auto p = params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  p.pChipName = chip.c_str();
  p.pCounterAvailabilityImage = availability.data();
  return cuptiProfilerHostInitialize(&p) == CUPTI_SUCCESS ? p.pHostObject : nullptr;
}

void free_host(CUpti_Profiler_Host_Object* host) {
  if (host == nullptr) return;
  auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(
      CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
  p.pHostObject = host;
  cuptiProfilerHostDeinitialize(&p);
}

// The metric set as a config image. A name the chip does not know makes
// CUPTI refuse the whole set, so then each is tried alone in a scratch host
// object and the refused ones are left out (and listed).
bool configure(State& s, const std::vector<std::string>& wanted, const std::string& chip,
               const std::vector<std::uint8_t>& availability, std::string* why) {
  s.host = host_object(chip, availability);
  if (s.host == nullptr) {
    *why = "hardware counters unavailable: CUPTI's host API does not know chip " + chip;
    return false;
  }
  s.metrics = wanted;
  if (!add_metrics(s.host, s.metrics)) {
    std::vector<std::string> accepted;
    for (const std::string& m : s.metrics) {
      CUpti_Profiler_Host_Object* scratch = host_object(chip, availability);
      (scratch != nullptr && add_metrics(scratch, {m}) ? accepted : s.refused).push_back(m);
      free_host(scratch);
    }
    free_host(s.host);
    s.host = host_object(chip, availability);
    s.metrics = accepted;
    if (s.host == nullptr || accepted.empty() || !add_metrics(s.host, accepted)) {
      *why = "hardware counters unavailable: chip " + chip + " refused the metric set";
      return false;
    }
  }
  auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = s.host;
  if (!ok(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize", why)) {
    return false;
  }
  s.config.assign(size.configImageSize, 0);
  auto image = params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = s.host;
  image.configImageSize = s.config.size();
  image.pConfigImage = s.config.data();
  if (!ok(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage", why)) {
    return false;
  }
  auto passes = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  passes.configImageSize = s.config.size();
  passes.pConfigImage = s.config.data();
  if (!ok(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses", why)) {
    return false;
  }
  s.passes = passes.numOfPasses;
  return true;
}

// The counter data image (sized by CUPTI for the metrics and ranges), then
// AutoRange + KernelReplay: the one combination in which CUPTI replays by itself.
bool enable_ranges(State& s, CUcontext ctx, std::string* why) {
  auto enable =
      params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  enable.ctx = ctx;
  if (!ok(cuptiRangeProfilerEnable(&enable), "cuptiRangeProfilerEnable", why)) return false;
  s.range = enable.pRangeProfilerObject;
  std::vector<const char*> names = c_names(s.metrics);
  auto size = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  size.pRangeProfilerObject = s.range;
  size.pMetricNames = names.data();
  size.numMetrics = names.size();
  size.maxNumOfRanges = s.max_ranges;
  size.maxNumRangeTreeNodes = static_cast<std::uint32_t>(s.max_ranges);
  const char* call = "cuptiRangeProfilerGetCounterDataSize";
  if (!ok(cuptiRangeProfilerGetCounterDataSize(&size), call, why)) return false;
  s.counter_data.assign(size.counterDataSize, 0);
  auto init = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pRangeProfilerObject = s.range;
  init.counterDataSize = s.counter_data.size();
  init.pCounterData = s.counter_data.data();
  call = "cuptiRangeProfilerCounterDataImageInitialize";
  if (!ok(cuptiRangeProfilerCounterDataImageInitialize(&init), call, why)) return false;
  auto config = params<CUpti_RangeProfiler_SetConfig_Params>(
      CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  config.pRangeProfilerObject = s.range;
  config.configSize = s.config.size();
  config.pConfig = s.config.data();
  config.counterDataImageSize = s.counter_data.size();
  config.pCounterDataImage = s.counter_data.data();
  config.range = CUPTI_AutoRange;
  config.replayMode = CUPTI_KernelReplay;
  config.maxRangesPerPass = s.max_ranges;
  config.numNestingLevels = 1;  // AutoRange requires 1
  config.minNestingLevel = 1;
  config.targetNestingLevel = 1;
  if (!ok(cuptiRangeProfilerSetConfig(&config), "cuptiRangeProfilerSetConfig", why)) return false;
  auto start =
      params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
  start.pRangeProfilerObject = s.range;
  return ok(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart", why);
}

// Every range's values; a range CUPTI cannot evaluate keeps NaNs.
void evaluate_ranges(State& s, std::size_t count, CounterReadout* out) {
  std::vector<const char*> names = c_names(s.metrics);
  const std::vector<std::string> all = metric_names();
  for (std::size_t r = 0; r < count; ++r) {
    std::vector<double> got(names.size(), 0.0);
    auto p = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    p.pHostObject = s.host;
    p.pCounterDataImage = s.counter_data.data();
    p.counterDataImageSize = s.counter_data.size();
    p.rangeIndex = r;
    p.ppMetricNames = names.data();
    p.numMetrics = names.size();
    p.pMetricValues = got.data();
    MetricValues values = no_values();
    if (cuptiProfilerHostEvaluateToGpuValues(&p) == CUPTI_SUCCESS) {
      for (std::size_t m = 0; m < s.metrics.size(); ++m) {
        for (std::size_t i = 0; i < all.size(); ++i) {
          if (all[i] == s.metrics[m]) values[i] = got[m];
        }
      }
    }
    out->ranges.push_back(values);
  }
}

void release(State& s) {
  if (s.range != nullptr) {
    auto p =
        params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = s.range;
    cuptiRangeProfilerDisable(&p);
    s.range = nullptr;
  }
  free_host(s.host);
  s.host = nullptr;
  if (s.initialized) {
    auto p =
        params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
    cuptiProfilerDeInitialize(&p);
    s.initialized = false;
  }
  // The activity collector left CUPTI attached for the counter steps
  // (CuptiCollector::finish); detached after the last, the steps after
  // them run as in a process that never profiled.
  if (s.detach_at_stop) {
    s.detach_at_stop = false;
    cuptiFinalize();
  }
}

}  // namespace

std::unique_ptr<CounterCollector> CounterCollector::start(std::size_t max_ranges,
                                                          const std::vector<Metric>& metrics,
                                                          bool detach_at_stop,
                                                          std::string* why_not) {
  auto s = std::make_unique<State>();
  s->max_ranges = max_ranges;
  int device = 0;
  CUcontext ctx = nullptr;
  if (cudaGetDevice(&device) != cudaSuccess || !current_context(&ctx, why_not)) {
    if (why_not->empty()) *why_not = "hardware counters unavailable: no current CUDA context";
    return nullptr;
  }
  auto init =
      params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  // Until it has started, a session detaches when released (State's
  // default): one that cannot start is the last.
  if (!ok(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize", why_not)) {
    release(*s);
    return nullptr;
  }
  s->initialized = true;
  std::string chip;
  std::vector<std::uint8_t> availability;
  if (!chip_and_availability(device, ctx, &chip, &availability, why_not) ||
      !configure(*s, metric_names(metrics), chip, availability, why_not) ||
      !enable_ranges(*s, ctx, why_not)) {
    release(*s);
    return nullptr;
  }
  s->detach_at_stop = detach_at_stop;
  s->baseline_launches = launch_replay_baseline();
  return std::unique_ptr<CounterCollector>(new CounterCollector(std::move(s)));
}

CounterCollector::CounterCollector(std::unique_ptr<State> state) : state_(std::move(state)) {}

CounterCollector::~CounterCollector() {
  release(*state_);
}

void CounterCollector::detach_when_released() {
  state_->detach_at_stop = true;
}

bool CounterCollector::stop(CounterReadout* out, std::string* why_not) {
  State& s = *state_;
  *out = CounterReadout{};
  auto stop = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  stop.pRangeProfilerObject = s.range;
  if (!ok(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop", why_not)) return false;
  auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = s.range;  // synchronises the context first
  if (!ok(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData", why_not)) {
    return false;
  }
  auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s.counter_data.data();
  info.counterDataImageSize = s.counter_data.size();
  const char* call = "cuptiRangeProfilerGetCounterDataInfo";
  if (!ok(cuptiRangeProfilerGetCounterDataInfo(&info), call, why_not)) return false;
  out->passes = s.passes;
  out->dropped_ranges = decode.numOfRangeDropped;
  out->refused = s.refused;
  evaluate_ranges(s, info.numTotalRanges, out);
  // The empty kernel's ranges come first (start()); the step's follow.
  const std::size_t baseline = std::min(s.baseline_launches, out->ranges.size());
  if (baseline > 0) {
    const std::vector<MetricValues> empty(out->ranges.begin(), out->ranges.begin() + baseline);
    out->replay_baseline = median_values(empty);
    out->baseline_launches = baseline;
    out->ranges.erase(out->ranges.begin(), out->ranges.begin() + baseline);
  }
  release(s);
  return true;
}

}  // namespace tinyllama::prof

#else  // no CUDA in this build

namespace tinyllama::prof {

struct CounterCollector::State {};

std::unique_ptr<CounterCollector> CounterCollector::start(std::size_t, const std::vector<Metric>&,
                                                          bool, std::string* why_not) {
  *why_not = "hardware counters unavailable: this build of tinyllama has no CUDA";
  return nullptr;
}

CounterCollector::CounterCollector(std::unique_ptr<State> state) : state_(std::move(state)) {}
CounterCollector::~CounterCollector() = default;
void CounterCollector::detach_when_released() {}
bool CounterCollector::stop(CounterReadout*, std::string* why_not) {
  *why_not = "hardware counters unavailable: this build of tinyllama has no CUDA";
  return false;
}

}  // namespace tinyllama::prof

#endif
