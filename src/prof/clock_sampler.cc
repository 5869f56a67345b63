#include "prof/clock_sampler.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <utility>

#include "cuda/cuda_entry.h"

namespace tinyllama::prof {
namespace {

// The few NVML entry points used, resolved from libnvidia-ml.so.1. Their C
// signatures (NVML's stable ABI): every call returns 0 on success; a device
// is an opaque handle; clocks in MHz, power in milliwatts.
struct Nvml {
  using Device = void*;
  using Init = int (*)();
  using Shutdown = int (*)();
  using ByBusId = int (*)(const char*, Device*);
  using Clock = int (*)(Device, int, unsigned int*);
  using Milliwatts = int (*)(Device, unsigned int*);
  using Reasons = int (*)(Device, unsigned long long*);
  static constexpr int kClockSm = 1;  // NVML_CLOCK_SM

  void* lib = nullptr;
  Shutdown shutdown = nullptr;
  Clock clock = nullptr;
  Milliwatts power = nullptr;
  Reasons reasons = nullptr;
  Device device = nullptr;
  bool initialised = false;

  ~Nvml() {
    if (initialised) shutdown();
    if (lib != nullptr) dlclose(lib);
  }

  template <typename F>
  bool resolve(F* f, const char* name) {
    *f = reinterpret_cast<F>(dlsym(lib, name));
    return *f != nullptr;
  }

  // Empty on success, else why not.
  std::string open(const std::string& bus_id, ClockReport* report) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return "the driver's NVML library (libnvidia-ml.so.1) is not there";
    Init init = nullptr;
    ByBusId by_bus = nullptr;
    Clock max_clock = nullptr;
    Milliwatts limit = nullptr;
    if (!resolve(&init, "nvmlInit_v2") || !resolve(&shutdown, "nvmlShutdown") ||
        !resolve(&by_bus, "nvmlDeviceGetHandleByPciBusId_v2") ||
        !resolve(&clock, "nvmlDeviceGetClockInfo") ||
        !resolve(&max_clock, "nvmlDeviceGetMaxClockInfo") ||
        !resolve(&power, "nvmlDeviceGetPowerUsage") ||
        !resolve(&limit, "nvmlDeviceGetEnforcedPowerLimit")) {
      return "NVML lacks a function it needs";
    }
    // The newer name first; drivers keep the older one.
    if (!resolve(&reasons, "nvmlDeviceGetCurrentClocksEventReasons") &&
        !resolve(&reasons, "nvmlDeviceGetCurrentClocksThrottleReasons")) {
      return "NVML lacks the clock event reasons";
    }
    if (init() != 0) return "NVML did not initialise";
    initialised = true;
    if (by_bus(bus_id.c_str(), &device) != 0) return "NVML does not know GPU " + bus_id;
    unsigned int mhz = 0, mw = 0;
    if (max_clock(device, kClockSm, &mhz) == 0) report->max_sm_mhz = mhz;
    if (limit(device, &mw) == 0) report->power_limit_w = mw / 1000.0;
    return {};
  }

  bool sample(ClockSample* s) const {
    unsigned int mhz = 0, mw = 0;
    unsigned long long bits = 0;
    if (clock(device, kClockSm, &mhz) != 0 || power(device, &mw) != 0 ||
        reasons(device, &bits) != 0) {
      return false;
    }
    s->sm_mhz = mhz;
    s->power_w = mw / 1000.0;
    s->reasons = bits;
    return true;
  }
};

}  // namespace

std::unique_ptr<ClockSampler> ClockSampler::for_gpu(const std::string& pci_bus_id,
                                                    double interval_ms) {
  ClockReport header;
  if (pci_bus_id.empty()) {
    header.note = "no CUDA device";
    return std::make_unique<ClockSampler>(nullptr, header, interval_ms);
  }
  auto nvml = std::make_shared<Nvml>();
  header.note = nvml->open(pci_bus_id, &header);
  if (!header.note.empty()) return std::make_unique<ClockSampler>(nullptr, header, interval_ms);
  return std::make_unique<ClockSampler>([nvml](ClockSample* s) { return nvml->sample(s); }, header,
                                        interval_ms);
}

std::unique_ptr<ClockSampler> ClockSampler::for_current_gpu() {
  std::string bus_id;
  cuda_pci_bus_id(&bus_id);  // left empty without a device: for_gpu says so
  return for_gpu(bus_id, kClockSampleMs);
}

ClockSampler::ClockSampler(ClockSource source, ClockReport header, double interval_ms)
    : source_(std::move(source)), report_(std::move(header)) {
  report_.interval_ms = interval_ms;
  report_.samples.clear();
}

ClockSampler::~ClockSampler() {
  stop();
}

const std::string& ClockSampler::note() const {
  return report_.note;
}

void ClockSampler::start() {
  if (!source_ || running_.exchange(true)) return;
  thread_ = std::thread([this] { run(); });
}

ClockReport ClockSampler::stop() {
  if (running_.exchange(false) && thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  return report_;
}

void ClockSampler::run() {
  const auto interval = std::chrono::duration<double, std::milli>(report_.interval_ms);
  auto next = std::chrono::steady_clock::now();
  while (running_.load()) {
    ClockSample s;
    if (source_(&s)) {
      std::lock_guard<std::mutex> lock(mutex_);
      report_.samples.push_back(s);
    }
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
    std::this_thread::sleep_until(next);
  }
}

}  // namespace tinyllama::prof
