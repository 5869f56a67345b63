// cupti_range_probe: a standalone probe for issue 44 (hardware counters via
// CUPTI's range profiler). It answers, on the device, before anything is built
// into the engine's profiler:
//   1. may this process read counters at all (exit 3 with one line if not),
//   2. which metric names the chip knows and what they read,
//   3. how many replay passes a metric set needs,
//   4. whether the values agree with ncu (scripts/probes/run-on-device.sh).
//
// It launches three kernels with known work (a streaming copy of N floats, an
// FFMA loop, a small bf16 tensor-core loop), each in its own range, and prints
// `range metric value` lines. See scripts/probes/README.md for usage and for
// what every line means.
//
// API: the CUDA 13 range profiler (cupti_range_profiler.h) for collection and
// the profiler host API (cupti_profiler_host.h) for metric enumeration,
// configuration and evaluation; nothing from the deprecated
// cuptiProfilerBeginSession family. From cupti_profiler_target.h it uses only
// the calls that are not deprecated (Initialize, DeviceSupported,
// GetCounterAvailability).

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <mma.h>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------------------
// Exit codes and error checks
// ---------------------------------------------------------------------------

// The exit codes are part of the probe's contract: run-on-device.sh and the
// person reading a device log tell "no permission" (3) apart from a broken
// call (1) without parsing text.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitPrivileges = 3;
constexpr int kExitUnsupported = 4;

[[noreturn]] void die(int code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::fprintf(stderr, "cupti_range_probe: ");
  std::vfprintf(stderr, fmt, args);
  std::fprintf(stderr, "\n");
  va_end(args);
  std::fflush(stdout);
  std::exit(code);
}

// "CUPTI_ERROR_X (message)": the enum name alone is terse and the message
// alone is hard to search for, so both go into every report.
std::string cupti_error_text(CUptiResult result) {
  const char* name = nullptr;
  const char* message = nullptr;
  if (cuptiGetResultString(result, &name) != CUPTI_SUCCESS || name == nullptr) name = "?";
  if (cuptiGetErrorMessage(result, &message) != CUPTI_SUCCESS || message == nullptr) message = "";
  std::string text = std::string(name) + " (" + std::to_string(static_cast<int>(result)) + ")";
  if (*message != '\0' && std::strcmp(message, name) != 0) text += std::string(": ") + message;
  return text;
}

bool is_privilege_error(CUptiResult result) {
  return result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
         result == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES;
}

// The driver's profiling restriction is the one failure the engine must turn
// into a message rather than a crash, so it gets a single, fixed line (grep
// for "insufficient privileges") and its own exit code wherever it shows up:
// in practice at cuptiProfilerGetCounterAvailability or cuptiRangeProfilerStart,
// not at cuptiRangeProfilerEnable.
[[noreturn]] void exit_privileges(const char* call, CUptiResult result) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "cupti_range_probe: insufficient privileges to read GPU performance counters: "
               "%s returned %s; the driver restricts profiling to admin users (run as root, or "
               "load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0; "
               "https://developer.nvidia.com/ERR_NVGPUCTRPERM)\n",
               call, cupti_error_text(result).c_str());
  std::exit(kExitPrivileges);
}

// Fatal check for calls the probe cannot go on without.
void cupti_check(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return;
  if (is_privilege_error(result)) exit_privileges(call, result);
  die(kExitError, "%s failed: %s", call, cupti_error_text(result).c_str());
}

// Non-fatal check for calls whose failure is an answer (an unknown metric):
// the reason goes to *why; a privilege error still ends the probe, because
// it would otherwise look like every metric being unknown.
bool cupti_try(CUptiResult result, const char* call, std::string* why) {
  if (result == CUPTI_SUCCESS) return true;
  if (is_privilege_error(result)) exit_privileges(call, result);
  *why = std::string(call) + ": " + cupti_error_text(result);
  return false;
}

void cuda_check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) {
    die(kExitError, "%s failed: %s (%s)", call, cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

void cu_check(CUresult err, const char* call) {
  if (err == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(err, &name);
  cuGetErrorString(err, &text);
  die(kExitError, "%s failed: %s (%s)", call, name ? name : "?", text ? text : "?");
}

// CUPTI's parameter structs: zeroed (pPriv and every unset field must be 0)
// with structSize set to the header's size for this CUPTI version.
template <typename Params>
Params cupti_params(size_t struct_size) {
  Params p{};
  p.structSize = struct_size;
  return p;
}

#define CUPTI_CHECK(call) cupti_check((call), #call)
#define CUDA_CHECK(call) cuda_check((call), #call)
#define CU_CHECK(call) cu_check((call), #call)

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

// The issue's metric list. sm__inst_executed_pipe_tensor_op_hmma.sum is the
// "try it" name: whether sm_90 knows it is one of the questions.
const char* const kDefaultMetrics[] = {
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sector_hit_rate.pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "gpu__time_duration.sum",
};

struct Options {
  std::vector<std::string> metrics;
  size_t n = size_t{1} << 28;  // floats per copy buffer: 1 GiB, ~20x H200's L2
  int fma_iters = 4096;
  int hmma_iters = 4096;
  int device = 0;
  bool list = false;
  std::string list_filter;
  bool list_submetrics = false;
  std::string chip;  // host-only mode: no GPU, no CUDA context
  bool kernels_only = false;
  bool user_range = false;
  bool print_metrics = false;
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: cupti_range_probe [options]\n"
               "  --metrics a,b,c   metrics to collect (default: the issue-44 list)\n"
               "  --n FLOATS        floats per copy buffer, multiple of 4 (default 268435456)\n"
               "  --fma-iters K     FFMA loop trips per thread (default 4096)\n"
               "  --hmma-iters K    mma_sync loop trips per warp (default 4096)\n"
               "  --device I        CUDA device index (default 0)\n"
               "  --user-range      UserRange + UserReplay (default AutoRange + KernelReplay)\n"
               "  --kernels-only    launch the kernels without CUPTI (for ncu)\n"
               "  --list [SUBSTR]   print the chip's base metrics containing SUBSTR\n"
               "  --submetrics      with --list: also the suffixes each metric accepts\n"
               "  --print-metrics   print the metric list (comma separated) and exit\n"
               "  --chip NAME       host only (no GPU): with --list, list NAME's metrics;\n"
               "                    alone, check the metric names and print pass counts\n"
               "exit: 0 ok, 1 error, 2 usage, 3 insufficient privileges, 4 unsupported\n");
}

std::vector<std::string> split_csv(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string part = text.substr(start, comma - start);
    if (!part.empty()) parts.push_back(part);
    start = comma + 1;
  }
  return parts;
}

long long parse_count(const char* flag, const char* text) {
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value <= 0)
    die(kExitUsage, "%s wants a positive integer", flag);
  return value;
}

// Returns the value after a flag, or dies: every flag but the switches takes one.
const char* flag_value(int argc, char** argv, int* i) {
  if (*i + 1 >= argc) die(kExitUsage, "%s wants a value (see --help)", argv[*i]);
  return argv[++*i];
}

Options parse_options(int argc, char** argv) {
  Options opt;
  for (const char* m : kDefaultMetrics) opt.metrics.push_back(m);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      std::exit(kExitOk);
    } else if (arg == "--metrics") {
      opt.metrics = split_csv(flag_value(argc, argv, &i));
    } else if (arg == "--n") {
      opt.n = static_cast<size_t>(parse_count("--n", flag_value(argc, argv, &i)));
    } else if (arg == "--fma-iters") {
      opt.fma_iters = static_cast<int>(parse_count("--fma-iters", flag_value(argc, argv, &i)));
    } else if (arg == "--hmma-iters") {
      opt.hmma_iters = static_cast<int>(parse_count("--hmma-iters", flag_value(argc, argv, &i)));
    } else if (arg == "--device") {
      opt.device = std::atoi(flag_value(argc, argv, &i));
    } else if (arg == "--user-range") {
      opt.user_range = true;
    } else if (arg == "--kernels-only") {
      opt.kernels_only = true;
    } else if (arg == "--list") {
      opt.list = true;  // the filter is optional: take the next word unless it is a flag
      if (i + 1 < argc && argv[i + 1][0] != '-') opt.list_filter = argv[++i];
    } else if (arg == "--print-metrics") {
      opt.print_metrics = true;
    } else if (arg == "--submetrics") {
      opt.list_submetrics = true;
    } else if (arg == "--chip") {
      opt.chip = flag_value(argc, argv, &i);
    } else {
      print_usage(stderr);
      die(kExitUsage, "unknown argument '%s'", arg.c_str());
    }
  }
  if (opt.n % 4 != 0) die(kExitUsage, "--n must be a multiple of 4 (the copy moves float4)");
  if (opt.metrics.empty()) die(kExitUsage, "--metrics is empty");
  return opt;
}

// ---------------------------------------------------------------------------
// Kernels with known work
// ---------------------------------------------------------------------------

// Streaming copy: reads 4N bytes and writes 4N bytes, each once. With buffers
// far larger than L2, DRAM traffic is 8N bytes give or take the L2-resident
// tail, which is the yardstick for dram__bytes_read/write.
__global__ void probe_copy(const float4* __restrict__ src, float4* __restrict__ dst, size_t n4) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    dst[i] = src[i];
  }
}

__global__ void probe_fill(float4* dst, size_t n4) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float f = static_cast<float>(i & 0xffff);
    dst[i] = make_float4(f, f + 1.0f, f + 2.0f, f + 3.0f);
  }
}

constexpr int kFmaChains = 8;  // independent chains so the FMA pipe, not latency, bounds it

// FFMA loop: exactly threads * iters * kFmaChains FFMA instructions (thread
// level). __fmaf_rn pins each one to an FFMA; the set-up uses I2F and FADD
// only, so that nothing else can be contracted into an extra FFMA.
__global__ void probe_fma(float* out, int iters) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  float acc[kFmaChains];
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) acc[j] = static_cast<float>((tid & 255) + j);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < kFmaChains; ++j) acc[j] = __fmaf_rn(acc[j], 0.999f, 0.001f);
  }
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) sum += acc[j];
  out[tid] = sum;
}

constexpr int kHmmaAccumulators = 2;  // independent accumulators per warp
constexpr int kHmmaWarpsPerBlock = 4;

// Tensor-core loop: each warp loads one 16x16 bf16 tile of A and B once and
// runs iters * kHmmaAccumulators wmma 16x16x16 mma_sync with fp32
// accumulators. On sm_80/sm_90 one such mma_sync is expected to lower to two
// HMMA.16816.F32.BF16 warp instructions (check with cuobjdump -sass).
__global__ void probe_hmma(const __nv_bfloat16* a, const __nv_bfloat16* b, float* out, int iters) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kHmmaAccumulators];
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
#pragma unroll
  for (int k = 0; k < kHmmaAccumulators; ++k) wmma::fill_fragment(acc[k], 0.0f);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < kHmmaAccumulators; ++k) wmma::mma_sync(acc[k], fa, fb, acc[k]);
  }
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
#pragma unroll
  for (int k = 0; k < kHmmaAccumulators; ++k) {
    wmma::store_matrix_sync(out + (static_cast<size_t>(warp) * kHmmaAccumulators + k) * 256, acc[k],
                            16, wmma::mem_row_major);
  }
}

__global__ void probe_fill_bf16(__nv_bfloat16* dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __float2bfloat16(static_cast<float>(i % 7) * 0.125f);
}

// Device buffers and launch shapes, sized from the SM count so that every
// kernel fills the chip.
struct Workload {
  size_t n = 0;  // floats per copy buffer
  float4* src = nullptr;
  float4* dst = nullptr;
  int sms = 0;
  int copy_blocks = 0;
  int fma_blocks = 0;
  int fma_iters = 0;
  float* fma_out = nullptr;
  int hmma_blocks = 0;
  int hmma_iters = 0;
  __nv_bfloat16* hmma_ab = nullptr;  // A tile then B tile, 256 values each
  float* hmma_out = nullptr;
};

constexpr int kThreads = 256;

size_t fma_threads(const Workload& w) {
  return static_cast<size_t>(w.fma_blocks) * kThreads;
}
size_t hmma_warps(const Workload& w) {
  return static_cast<size_t>(w.hmma_blocks) * kHmmaWarpsPerBlock;
}

// Allocates and initialises everything before any profiling starts, so that
// the set-up kernels are outside the profiled ranges (in AutoRange mode any
// kernel between Start and Stop becomes a range).
Workload make_workload(const Options& opt) {
  Workload w;
  w.n = opt.n;
  CUDA_CHECK(cudaDeviceGetAttribute(&w.sms, cudaDevAttrMultiProcessorCount, opt.device));
  w.copy_blocks = w.sms * 8;
  w.fma_blocks = w.sms * 8;
  w.fma_iters = opt.fma_iters;
  w.hmma_blocks = w.sms * 2;
  w.hmma_iters = opt.hmma_iters;
  const size_t n4 = w.n / 4;
  CUDA_CHECK(cudaMalloc(&w.src, n4 * sizeof(float4)));
  CUDA_CHECK(cudaMalloc(&w.dst, n4 * sizeof(float4)));
  CUDA_CHECK(cudaMalloc(&w.fma_out, fma_threads(w) * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&w.hmma_ab, 512 * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&w.hmma_out, hmma_warps(w) * kHmmaAccumulators * 256 * sizeof(float)));
  probe_fill<<<w.copy_blocks, kThreads>>>(w.src, n4);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemset(w.dst, 0, n4 * sizeof(float4)));
  probe_fill_bf16<<<2, kThreads>>>(w.hmma_ab, 512);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

void free_workload(Workload* w) {
  CUDA_CHECK(cudaFree(w->src));
  CUDA_CHECK(cudaFree(w->dst));
  CUDA_CHECK(cudaFree(w->fma_out));
  CUDA_CHECK(cudaFree(w->hmma_ab));
  CUDA_CHECK(cudaFree(w->hmma_out));
}

void launch_copy(const Workload& w) {
  probe_copy<<<w.copy_blocks, kThreads>>>(w.src, w.dst, w.n / 4);
  CUDA_CHECK(cudaGetLastError());
}

void launch_fma(const Workload& w) {
  probe_fma<<<w.fma_blocks, kThreads>>>(w.fma_out, w.fma_iters);
  CUDA_CHECK(cudaGetLastError());
}

void launch_hmma(const Workload& w) {
  probe_hmma<<<w.hmma_blocks, kHmmaWarpsPerBlock * 32>>>(w.hmma_ab, w.hmma_ab + 256, w.hmma_out,
                                                         w.hmma_iters);
  CUDA_CHECK(cudaGetLastError());
}

// The probe's ranges, in launch order. In AutoRange mode CUPTI names ranges
// by launch index, so this order is also how range i is mapped to a label.
struct ProbeKernel {
  const char* label;
  void (*launch)(const Workload&);
};

const ProbeKernel kKernels[] = {
    {"copy", launch_copy},
    {"fma", launch_fma},
    {"hmma", launch_hmma},
};
constexpr size_t kNumKernels = sizeof(kKernels) / sizeof(kKernels[0]);

// Spot check that the copy copied (and, after kernel replay, that CUPTI's
// save/restore left the output as one run would).
void check_copy(const Workload& w) {
  const size_t n4 = w.n / 4;
  const size_t picks[] = {0, n4 / 3, n4 / 2, n4 - 1};
  for (size_t i : picks) {
    float4 got;
    CUDA_CHECK(cudaMemcpy(&got, w.dst + i, sizeof(got), cudaMemcpyDeviceToHost));
    float f = static_cast<float>(i & 0xffff);
    if (got.x != f || got.w != f + 3.0f) {
      std::printf("# copy check FAILED at float4 %zu: %g %g, want %g %g\n", i, got.x, got.w, f,
                  f + 3.0f);
      return;
    }
  }
  std::printf("# copy check ok (dst matches src at 4 spots)\n");
}

// ---------------------------------------------------------------------------
// Profiler host API: metric enumeration, configuration, evaluation
// ---------------------------------------------------------------------------

// For a --chip typo: the names this CUPTI knows (GH100 is the H100/H200).
void print_supported_chips() {
  auto p = cupti_params<CUpti_Profiler_Host_GetSupportedChips_Params>(
      CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE);
  CUPTI_CHECK(cuptiProfilerHostGetSupportedChips(&p));
  std::printf("# chips this CUPTI knows:");
  for (size_t i = 0; i < p.numChips; ++i) std::printf(" %s", p.ppChipNames[i]);
  std::printf("\n");
}

// The host object holds the chip's metric tables; it is what turns metric
// names into a config image and counter data into values. The counter
// availability image (from the device) narrows it to counters this context
// can really read; nullptr is accepted for chips CUPTI knows by name, which
// is what the host-only --chip mode relies on.
CUpti_Profiler_Host_Object* host_init(const std::string& chip,
                                      const std::vector<uint8_t>& availability) {
  auto p = cupti_params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  p.pChipName = chip.c_str();
  p.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
  CUptiResult r = cuptiProfilerHostInitialize(&p);
  if (r == CUPTI_ERROR_INVALID_CHIP_NAME) print_supported_chips();
  cupti_check(r, "cuptiProfilerHostInitialize");
  return p.pHostObject;
}

void host_deinit(CUpti_Profiler_Host_Object* host) {
  auto p = cupti_params<CUpti_Profiler_Host_Deinitialize_Params>(
      CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
  p.pHostObject = host;
  CUPTI_CHECK(cuptiProfilerHostDeinitialize(&p));
}

// Adds metrics to a host object and reads back the config image (the
// scheduling of their raw counters over passes). Returns false with the
// reason when CUPTI refuses a name.
bool build_config(CUpti_Profiler_Host_Object* host, std::vector<const char*> names,
                  std::vector<uint8_t>* config, std::string* why) {
  auto add = cupti_params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = host;
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  if (!cupti_try(cuptiProfilerHostConfigAddMetrics(&add), "cuptiProfilerHostConfigAddMetrics",
                 why)) {
    return false;
  }
  auto size = cupti_params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = host;
  if (!cupti_try(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize",
                 why)) {
    return false;
  }
  config->assign(size.configImageSize, 0);
  auto image = cupti_params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = host;
  image.configImageSize = config->size();
  image.pConfigImage = config->data();
  return cupti_try(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage", why);
}

// Replay passes a config image needs: 1 means every counter fits in one run
// of the kernel; more means kernel replay (or the caller's user replay) reruns it.
size_t config_passes(std::vector<uint8_t>* config) {
  auto p = cupti_params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  p.configImageSize = config->size();
  p.pConfigImage = config->data();
  CUPTI_CHECK(cuptiProfilerHostGetNumOfPasses(&p));
  return p.numOfPasses;
}

const char* metric_type_name(CUpti_MetricType type) {
  switch (type) {
    case CUPTI_METRIC_TYPE_COUNTER:
      return "counter";
    case CUPTI_METRIC_TYPE_RATIO:
      return "ratio";
    case CUPTI_METRIC_TYPE_THROUGHPUT:
      return "throughput";
    default:
      return "?";
  }
}

// One "# about" line per metric: its type, unit and CUPTI's own description,
// which answers "what does this name read" on the device. Failure here is
// not fatal: a name can be configurable even when its properties are not
// reported for the full (rollup + submetric) spelling.
void print_metric_properties(CUpti_Profiler_Host_Object* host, const std::string& name) {
  auto p = cupti_params<CUpti_Profiler_Host_GetMetricProperties_Params>(
      CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
  p.pHostObject = host;
  p.pMetricName = name.c_str();
  std::string why;
  if (!cupti_try(cuptiProfilerHostGetMetricProperties(&p), "cuptiProfilerHostGetMetricProperties",
                 &why)) {
    std::printf("# about %s: (no properties: %s)\n", name.c_str(), why.c_str());
    return;
  }
  std::printf("# about %s: %s, unit '%s', hw unit '%s': %s\n", name.c_str(),
              metric_type_name(p.metricType), p.pDimUnit ? p.pDimUnit : "",
              p.pHwUnit ? p.pHwUnit : "", p.pDescription ? p.pDescription : "");
}

// Tries one metric alone on a fresh host object: an unknown name must not
// poison the object that builds the real config, and the one-metric pass
// count shows which metric makes a set multi-pass.
bool check_metric(const std::string& chip, const std::vector<uint8_t>& availability,
                  const std::string& name, size_t* passes, std::string* why) {
  CUpti_Profiler_Host_Object* host = host_init(chip, availability);
  std::vector<uint8_t> config;
  bool ok = build_config(host, {name.c_str()}, &config, why);
  if (ok) {
    *passes = config_passes(&config);
    print_metric_properties(host, name);
  }
  host_deinit(host);
  return ok;
}

// Splits the requested metrics into the ones the chip accepts and prints a
// `skip` line for each one it does not (the probe goes on without it).
std::vector<std::string> accepted_metrics(const std::string& chip,
                                          const std::vector<uint8_t>& availability,
                                          const std::vector<std::string>& requested) {
  std::vector<std::string> accepted;
  for (const std::string& name : requested) {
    size_t passes = 0;
    std::string why;
    if (check_metric(chip, availability, name, &passes, &why)) {
      std::printf("passes %s %zu\n", name.c_str(), passes);
      accepted.push_back(name);
    } else {
      std::printf("skip %s %s\n", name.c_str(), why.c_str());
    }
  }
  return accepted;
}

std::vector<const char*> c_names(const std::vector<std::string>& names) {
  std::vector<const char*> out;
  for (const std::string& n : names) out.push_back(n.c_str());
  return out;
}

bool contains_nocase(const std::string& text, const std::string& part) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  return lower(text).find(lower(part)) != std::string::npos;
}

// The suffixes a base metric accepts (.sum, .avg.pct_of_peak_sustained_active,
// ...), on one line: a full metric name is base + one of these.
void print_submetrics(CUpti_Profiler_Host_Object* host, const char* base, CUpti_MetricType type) {
  auto p = cupti_params<CUpti_Profiler_Host_GetSubMetrics_Params>(
      CUpti_Profiler_Host_GetSubMetrics_Params_STRUCT_SIZE);
  p.pHostObject = host;
  p.metricType = type;
  p.pMetricName = base;
  std::string why;
  if (!cupti_try(cuptiProfilerHostGetSubMetrics(&p), "cuptiProfilerHostGetSubMetrics", &why)) {
    std::printf("    (no submetrics: %s)\n", why.c_str());
    return;
  }
  std::printf("   ");
  for (size_t i = 0; i < p.numOfSubmetrics; ++i) std::printf(" %s", p.ppSubMetrics[i]);
  std::printf("\n");
}

// CUPTI's one-line description of a base metric, or "" when it has none.
std::string metric_description(CUpti_Profiler_Host_Object* host, const char* name) {
  auto p = cupti_params<CUpti_Profiler_Host_GetMetricProperties_Params>(
      CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
  p.pHostObject = host;
  p.pMetricName = name;
  std::string why;
  if (!cupti_try(cuptiProfilerHostGetMetricProperties(&p), "cuptiProfilerHostGetMetricProperties",
                 &why)) {
    return "";
  }
  return p.pDescription ? p.pDescription : "";
}

// --list: every base metric of every type whose name contains the filter
// (any case), with its description, so the right sm_90 spelling can be
// found; --submetrics adds the suffixes each accepts (the same long list for
// most counters, hence off by default).
void list_metrics(const std::string& chip, const std::vector<uint8_t>& availability,
                  const Options& opt) {
  CUpti_Profiler_Host_Object* host = host_init(chip, availability);
  size_t shown = 0;
  for (int t = 0; t < CUPTI_METRIC_TYPE__COUNT; ++t) {
    auto p = cupti_params<CUpti_Profiler_Host_GetBaseMetrics_Params>(
        CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE);
    p.pHostObject = host;
    p.metricType = static_cast<CUpti_MetricType>(t);
    CUPTI_CHECK(cuptiProfilerHostGetBaseMetrics(&p));
    for (size_t i = 0; i < p.numMetrics; ++i) {
      const char* name = p.ppMetricNames[i];
      if (!opt.list_filter.empty() && !contains_nocase(name, opt.list_filter)) continue;
      std::printf("%s %s  -- %s\n", metric_type_name(p.metricType), name,
                  metric_description(host, name).c_str());
      if (opt.list_submetrics) print_submetrics(host, name, p.metricType);
      ++shown;
    }
  }
  std::printf("# %zu base metrics on %s match '%s'\n", shown, chip.c_str(),
              opt.list_filter.c_str());
  host_deinit(host);
}

// ---------------------------------------------------------------------------
// Target side: device checks and the range profiler
// ---------------------------------------------------------------------------

const char* support_name(CUpti_Profiler_Support_Level level) {
  switch (level) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED:
      return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED:
      return "DISABLED";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED:
      return "UNSUPPORTED";
    default:
      return "unknown";
  }
}

// Says why a device cannot be profiled (vGPU with profiling off, confidential
// compute, MIG-style restrictions...) before the range profiler fails with a
// less specific error. Exits 4 when the device says no.
void require_device_support(CUdevice device) {
  auto p = cupti_params<CUpti_Profiler_DeviceSupported_Params>(
      CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE);
  p.cuDevice = device;
  p.api = CUPTI_PROFILER_RANGE_PROFILING;
  CUPTI_CHECK(cuptiProfilerDeviceSupported(&p));
  std::printf(
      "# device support: overall %s (architecture %s, sli %s, vgpu %s, confidential compute %s, "
      "cmp %s, wsl %s)\n",
      support_name(p.isSupported), support_name(p.architecture), support_name(p.sli),
      support_name(p.vGpu), support_name(p.confidentialCompute), support_name(p.cmp),
      support_name(p.wsl));
  if (p.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    die(kExitUnsupported, "range profiling is not supported on this device (see the line above)");
  }
}

std::string device_chip_name(int device) {
  auto p =
      cupti_params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  p.deviceIndex = static_cast<size_t>(device);
  CUPTI_CHECK(cuptiDeviceGetChipName(&p));
  return p.pChipName;
}

// Which raw counters this context may read. Queried twice: once for the
// size, once to fill. Under the driver's admin-only restriction this is
// where CUPTI_ERROR_INSUFFICIENT_PRIVILEGES is expected first. With
// fatal_on_privileges false (--list) the probe falls back to no image.
std::vector<uint8_t> counter_availability(CUcontext ctx, bool fatal_on_privileges) {
  auto p = cupti_params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  p.ctx = ctx;
  CUptiResult r = cuptiProfilerGetCounterAvailability(&p);
  if (is_privilege_error(r) && !fatal_on_privileges) {
    std::printf("# counter availability: %s; listing without it\n", cupti_error_text(r).c_str());
    return {};
  }
  cupti_check(r, "cuptiProfilerGetCounterAvailability (size)");
  std::vector<uint8_t> image(p.counterAvailabilityImageSize, 0);
  p.pCounterAvailabilityImage = image.data();
  cupti_check(cuptiProfilerGetCounterAvailability(&p), "cuptiProfilerGetCounterAvailability");
  return image;
}

// Brings up CUDA on the device and returns its primary context, which is the
// one the runtime API launches into and so the one to profile.
CUcontext init_cuda(int device, CUdevice* cu_device) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaFree(nullptr));  // creates the primary context
  CUcontext ctx = nullptr;
  CU_CHECK(cuCtxGetCurrent(&ctx));
  CU_CHECK(cuDeviceGet(cu_device, device));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("# device %d: %s, sm_%d%d, %d SMs, L2 %d MiB\n", device, prop.name, prop.major,
              prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  return ctx;
}

void profiler_initialize() {
  auto p =
      cupti_params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  CUPTI_CHECK(cuptiProfilerInitialize(&p));
}

void profiler_deinitialize() {
  auto p = cupti_params<CUpti_Profiler_DeInitialize_Params>(
      CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
  CUPTI_CHECK(cuptiProfilerDeInitialize(&p));
}

// Room for the probe's three ranges with slack: a range beyond this is
// dropped (and reported by DecodeData), not an error.
constexpr size_t kMaxRanges = 16;

CUpti_RangeProfiler_Object* range_enable(CUcontext ctx) {
  auto p = cupti_params<CUpti_RangeProfiler_Enable_Params>(
      CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  p.ctx = ctx;
  CUPTI_CHECK(cuptiRangeProfilerEnable(&p));
  return p.pRangeProfilerObject;
}

void range_disable(CUpti_RangeProfiler_Object* obj) {
  auto p = cupti_params<CUpti_RangeProfiler_Disable_Params>(
      CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = obj;
  CUPTI_CHECK(cuptiRangeProfilerDisable(&p));
}

// The counter data image is the host buffer DecodeData writes results into;
// its layout depends on the metric list and the range capacity, so CUPTI
// sizes and initialises it.
std::vector<uint8_t> counter_data_image(CUpti_RangeProfiler_Object* obj,
                                        std::vector<const char*> names) {
  auto size = cupti_params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  size.pRangeProfilerObject = obj;
  size.pMetricNames = names.data();
  size.numMetrics = names.size();
  size.maxNumOfRanges = kMaxRanges;
  size.maxNumRangeTreeNodes = static_cast<uint32_t>(kMaxRanges);
  CUPTI_CHECK(cuptiRangeProfilerGetCounterDataSize(&size));
  std::vector<uint8_t> image(size.counterDataSize, 0);
  auto init = cupti_params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pRangeProfilerObject = obj;
  init.counterDataSize = image.size();
  init.pCounterData = image.data();
  CUPTI_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&init));
  return image;
}

// AutoRange + KernelReplay: one range per kernel launch and CUPTI reruns
// each kernel (saving and restoring the memory it writes) until all passes
// are collected; it is the only combination in which CUPTI replays on its
// own, and the header/docs say KernelReplay works only with AutoRange.
// UserRange + UserReplay (--user-range): named Push/Pop ranges, and the
// probe itself reruns the Start..Stop block once per pass (its kernels are
// idempotent, so no checkpoint/restore is needed).
void range_set_config(CUpti_RangeProfiler_Object* obj, std::vector<uint8_t>* config,
                      std::vector<uint8_t>* counter_data, bool user_range) {
  auto p = cupti_params<CUpti_RangeProfiler_SetConfig_Params>(
      CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = obj;
  p.configSize = config->size();
  p.pConfig = config->data();
  p.counterDataImageSize = counter_data->size();
  p.pCounterDataImage = counter_data->data();
  p.range = user_range ? CUPTI_UserRange : CUPTI_AutoRange;
  p.replayMode = user_range ? CUPTI_UserReplay : CUPTI_KernelReplay;
  p.maxRangesPerPass = kMaxRanges;
  p.numNestingLevels = 1;  // must be 1 for AutoRange; the probe's user ranges are flat too
  p.minNestingLevel = 1;
  p.passIndex = 0;
  p.targetNestingLevel = 1;
  CUPTI_CHECK(cuptiRangeProfilerSetConfig(&p));
}

void range_start(CUpti_RangeProfiler_Object* obj) {
  auto p =
      cupti_params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = obj;
  CUPTI_CHECK(cuptiRangeProfilerStart(&p));
}

// Returns whether every pass has been submitted (always true for kernel
// replay; for user replay, false until the block has run once per pass).
bool range_stop(CUpti_RangeProfiler_Object* obj) {
  auto p =
      cupti_params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = obj;
  CUPTI_CHECK(cuptiRangeProfilerStop(&p));
  return p.isAllPassSubmitted != 0;
}

void range_push(CUpti_RangeProfiler_Object* obj, const char* name) {
  auto p = cupti_params<CUpti_RangeProfiler_PushRange_Params>(
      CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = obj;
  p.pRangeName = name;
  CUPTI_CHECK(cuptiRangeProfilerPushRange(&p));
}

void range_pop(CUpti_RangeProfiler_Object* obj) {
  auto p = cupti_params<CUpti_RangeProfiler_PopRange_Params>(
      CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = obj;
  CUPTI_CHECK(cuptiRangeProfilerPopRange(&p));
}

// Copies the collected counters from the GPU into the counter data image
// (DecodeData synchronises the context first). Dropped ranges mean
// kMaxRanges was too small or a stray kernel ran inside Start..Stop.
void range_decode(CUpti_RangeProfiler_Object* obj) {
  auto p = cupti_params<CUpti_RangeProfiler_DecodeData_Params>(
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  p.pRangeProfilerObject = obj;
  CUPTI_CHECK(cuptiRangeProfilerDecodeData(&p));
  if (p.numOfRangeDropped != 0) std::printf("# WARNING: %zu ranges dropped\n", p.numOfRangeDropped);
}

// Runs the kernels between Start and Stop, once per pass when the probe does
// the replay, and returns how many times the block ran.
size_t collect(CUpti_RangeProfiler_Object* obj, const Workload& w, bool user_range, size_t passes) {
  size_t runs = 0;
  bool all_submitted = false;
  while (!all_submitted) {
    if (runs > passes + 1) die(kExitError, "still not all passes submitted after %zu runs", runs);
    range_start(obj);
    for (const ProbeKernel& k : kKernels) {
      if (user_range) range_push(obj, k.label);
      k.launch(w);
      if (user_range) range_pop(obj);
    }
    all_submitted = range_stop(obj);
    ++runs;
    if (!user_range && !all_submitted) {
      die(kExitError, "kernel replay returned from Stop with passes still to submit");
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return runs;
}

// ---------------------------------------------------------------------------
// Evaluation and report
// ---------------------------------------------------------------------------

size_t counter_data_ranges(const std::vector<uint8_t>& image) {
  auto p = cupti_params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  p.pCounterDataImage = image.data();
  p.counterDataImageSize = image.size();
  CUPTI_CHECK(cuptiRangeProfilerGetCounterDataInfo(&p));
  return p.numTotalRanges;
}

std::string cupti_range_name(const std::vector<uint8_t>& image, size_t index) {
  auto p = cupti_params<CUpti_RangeProfiler_CounterData_GetRangeInfo_Params>(
      CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE);
  p.pCounterDataImage = image.data();
  p.counterDataImageSize = image.size();
  p.rangeIndex = index;
  p.rangeDelimiter = "/";
  CUPTI_CHECK(cuptiRangeProfilerCounterDataGetRangeInfo(&p));
  return p.rangeName ? p.rangeName : "";
}

// The probe's label for a range: the user-range name as is; in AutoRange
// mode CUPTI names ranges by launch index, which maps to kKernels.
std::string range_label(const std::string& cupti_name, size_t index) {
  for (const ProbeKernel& k : kKernels) {
    if (cupti_name == k.label) return cupti_name;
  }
  if (index < kNumKernels) return kKernels[index].label;
  return "range" + std::to_string(index);
}

bool evaluate(CUpti_Profiler_Host_Object* host, const std::vector<uint8_t>& image, size_t index,
              std::vector<const char*> names, double* values, std::string* why) {
  auto p = cupti_params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  p.pHostObject = host;
  p.pCounterDataImage = image.data();
  p.counterDataImageSize = image.size();
  p.rangeIndex = index;
  p.ppMetricNames = names.data();
  p.numMetrics = names.size();
  p.pMetricValues = values;
  return cupti_try(cuptiProfilerHostEvaluateToGpuValues(&p), "cuptiProfilerHostEvaluateToGpuValues",
                   why);
}

// Values of every metric for one range. All at once first; if CUPTI refuses
// the set, metric by metric, so that one bad metric costs only its own value
// (NaN, with a `noeval` line saying why).
std::vector<double> range_values(CUpti_Profiler_Host_Object* host,
                                 const std::vector<uint8_t>& image, size_t index,
                                 const std::vector<std::string>& metrics,
                                 const std::string& label) {
  std::vector<double> values(metrics.size(), NAN);
  std::string why;
  if (evaluate(host, image, index, c_names(metrics), values.data(), &why)) return values;
  for (size_t m = 0; m < metrics.size(); ++m) {
    if (!evaluate(host, image, index, {metrics[m].c_str()}, &values[m], &why)) {
      values[m] = NAN;
      std::printf("noeval %s %s %s\n", label.c_str(), metrics[m].c_str(), why.c_str());
    }
  }
  return values;
}

// Integers (counts, bytes, ns) as integers so they can be compared with
// ncu digit by digit; rates and percentages with 4 decimals.
std::string format_value(double v) {
  char buf[64];
  if (std::isnan(v)) return "nan";
  if (v == std::floor(v) && std::fabs(v) < 9e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4f", v);
  }
  return buf;
}

// Per range label, per metric: what the run measured (NaN when absent).
struct Measured {
  std::vector<std::string> labels;
  std::vector<std::vector<double>> values;  // [range][metric]
  std::vector<std::string> metrics;

  double get(const std::string& label, const std::string& metric) const {
    for (size_t r = 0; r < labels.size(); ++r) {
      if (labels[r] != label) continue;
      for (size_t m = 0; m < metrics.size(); ++m) {
        if (metrics[m] == metric) return values[r][m];
      }
    }
    return NAN;
  }
};

Measured evaluate_all(CUpti_Profiler_Host_Object* host, const std::vector<uint8_t>& image,
                      const std::vector<std::string>& metrics) {
  Measured out;
  out.metrics = metrics;
  size_t ranges = counter_data_ranges(image);
  std::printf("# %zu ranges in the counter data\n", ranges);
  for (size_t r = 0; r < ranges; ++r) {
    std::string name = cupti_range_name(image, r);
    std::string label = range_label(name, r);
    std::printf("# range %zu: CUPTI name '%s' -> %s\n", r, name.c_str(), label.c_str());
    out.labels.push_back(label);
    out.values.push_back(range_values(host, image, r, metrics, label));
    for (size_t m = 0; m < metrics.size(); ++m) {
      std::printf("%s %s %s\n", label.c_str(), metrics[m].c_str(),
                  format_value(out.values.back()[m]).c_str());
    }
  }
  return out;
}

// One `check` line: a measured value beside what the kernel's code says it
// must be. ratio near 1 means the counter reads what its name says.
void print_check(const Measured& got, const char* label, const char* metric, double expected,
                 const char* note) {
  double measured = got.get(label, metric);
  std::printf("check %s %s expected=%s measured=%s ratio=%s  # %s\n", label, metric,
              format_value(expected).c_str(), format_value(measured).c_str(),
              std::isnan(measured) ? "nan" : format_value(measured / expected).c_str(), note);
}

void print_checks(const Measured& got, const Workload& w) {
  const double bytes = 4.0 * static_cast<double>(w.n);
  print_check(got, "copy", "dram__bytes_read.sum", bytes, "4N: src read once");
  print_check(got, "copy", "dram__bytes_write.sum", bytes,
              "4N: dst written once; may be a bit low by the L2-resident tail");
  const double read = got.get("copy", "dram__bytes_read.sum");
  const double write = got.get("copy", "dram__bytes_write.sum");
  std::printf("check copy dram_bytes_total expected=%s measured=%s ratio=%s  # 8N\n",
              format_value(2 * bytes).c_str(), format_value(read + write).c_str(),
              format_value((read + write) / (2 * bytes)).c_str());
  const double ffma = static_cast<double>(fma_threads(w)) * w.fma_iters * kFmaChains;
  print_check(got, "fma", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", ffma,
              "threads * iters * chains");
  const double hmma = static_cast<double>(hmma_warps(w)) * w.hmma_iters * kHmmaAccumulators * 2;
  print_check(got, "hmma", "sm__inst_executed_pipe_tensor_op_hmma.sum", hmma,
              "warps * iters * accumulators * 2, if one 16x16x16 mma_sync = 2 HMMA.16816");
  std::printf(
      "# copy ffma should be 0: %s; hmma ffma: %s\n",
      format_value(got.get("copy", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum")).c_str(),
      format_value(got.get("hmma", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum")).c_str());
}

void print_workload(const Workload& w) {
  std::printf("# copy: %zu floats, %d blocks x %d threads; expected DRAM read %s B, write %s B\n",
              w.n, w.copy_blocks, kThreads, format_value(4.0 * w.n).c_str(),
              format_value(4.0 * w.n).c_str());
  std::printf("# fma: %d blocks x %d threads x %d iters x %d chains\n", w.fma_blocks, kThreads,
              w.fma_iters, kFmaChains);
  std::printf("# hmma: %d blocks x %d warps x %d iters x %d accumulators (bf16 wmma 16x16x16)\n",
              w.hmma_blocks, kHmmaWarpsPerBlock, w.hmma_iters, kHmmaAccumulators);
}

// ---------------------------------------------------------------------------
// Modes
// ---------------------------------------------------------------------------

// --kernels-only: the same launches with no CUPTI call at all, so that ncu
// (which injects its own CUPTI) can profile the very same kernels.
int run_kernels_only(const Options& opt) {
  CUdevice cu_device;
  init_cuda(opt.device, &cu_device);
  Workload w = make_workload(opt);
  print_workload(w);
  for (const ProbeKernel& k : kKernels) k.launch(w);
  CUDA_CHECK(cudaDeviceSynchronize());
  check_copy(w);
  free_workload(&w);
  return kExitOk;
}

// --chip NAME without a GPU: checks the metric names against the chip's
// tables and prints pass counts. Answers questions 2 (names) and 3 (passes)
// from any machine with the toolkit.
int run_host_only(const Options& opt) {
  std::printf("# host only: chip %s, no counter availability image\n", opt.chip.c_str());
  std::vector<uint8_t> none;
  std::vector<std::string> metrics = accepted_metrics(opt.chip, none, opt.metrics);
  if (metrics.empty()) die(kExitError, "no metric accepted");
  CUpti_Profiler_Host_Object* host = host_init(opt.chip, none);
  std::vector<uint8_t> config;
  std::string why;
  if (!build_config(host, c_names(metrics), &config, &why)) die(kExitError, "%s", why.c_str());
  std::printf("passes ALL %zu\n", config_passes(&config));
  host_deinit(host);
  return kExitOk;
}

int run_list(const Options& opt) {
  if (!opt.chip.empty()) {
    list_metrics(opt.chip, {}, opt);
    return kExitOk;
  }
  CUdevice cu_device;
  CUcontext ctx = init_cuda(opt.device, &cu_device);
  profiler_initialize();
  std::string chip = device_chip_name(opt.device);
  std::vector<uint8_t> availability = counter_availability(ctx, false);
  list_metrics(chip, availability, opt);
  profiler_deinitialize();
  return kExitOk;
}

// The full probe. Call order:
//   cuptiProfilerInitialize, cuptiProfilerDeviceSupported,
//   cuptiDeviceGetChipName, cuptiProfilerGetCounterAvailability,
//   per metric: cuptiProfilerHostInitialize, ...ConfigAddMetrics,
//     ...GetConfigImageSize, ...GetConfigImage, ...GetNumOfPasses,
//     ...GetMetricProperties, ...HostDeinitialize,
//   the set: HostInitialize, ConfigAddMetrics, GetConfigImage, GetNumOfPasses,
//   cuptiRangeProfilerEnable, ...GetCounterDataSize,
//   ...CounterDataImageInitialize, ...SetConfig,
//   per pass: ...Start, [PushRange, kernel, PopRange] x3, ...Stop,
//   ...DecodeData, ...GetCounterDataInfo,
//   per range: ...CounterDataGetRangeInfo, cuptiProfilerHostEvaluateToGpuValues,
//   cuptiRangeProfilerDisable, cuptiProfilerHostDeinitialize,
//   cuptiProfilerDeInitialize.
int run_profile(const Options& opt) {
  CUdevice cu_device;
  CUcontext ctx = init_cuda(opt.device, &cu_device);
  profiler_initialize();
  require_device_support(cu_device);
  std::string chip = device_chip_name(opt.device);
  std::printf("# chip %s, mode %s\n", chip.c_str(),
              opt.user_range ? "UserRange + UserReplay" : "AutoRange + KernelReplay");
  std::vector<uint8_t> availability = counter_availability(ctx, true);

  std::vector<std::string> metrics = accepted_metrics(chip, availability, opt.metrics);
  if (metrics.empty()) die(kExitError, "no metric accepted");
  CUpti_Profiler_Host_Object* host = host_init(chip, availability);
  std::vector<uint8_t> config;
  std::string why;
  if (!build_config(host, c_names(metrics), &config, &why)) die(kExitError, "%s", why.c_str());
  const size_t passes = config_passes(&config);
  std::printf("passes ALL %zu\n", passes);

  Workload w = make_workload(opt);
  print_workload(w);
  CUpti_RangeProfiler_Object* obj = range_enable(ctx);
  std::vector<uint8_t> counter_data = counter_data_image(obj, c_names(metrics));
  range_set_config(obj, &config, &counter_data, opt.user_range);
  size_t runs = collect(obj, w, opt.user_range, passes);
  std::printf("# Start..Stop block ran %zu time(s)%s\n", runs,
              opt.user_range ? "" : " (kernel replay repeats each kernel inside CUPTI)");
  range_decode(obj);
  Measured got = evaluate_all(host, counter_data, metrics);
  print_checks(got, w);
  check_copy(w);

  range_disable(obj);
  host_deinit(host);
  profiler_deinitialize();
  free_workload(&w);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // lines interleave sanely with stderr in logs
  Options opt = parse_options(argc, argv);
  if (opt.print_metrics) {  // run-on-device.sh hands the same list to ncu
    for (size_t i = 0; i < opt.metrics.size(); ++i) {
      std::printf("%s%s", i ? "," : "", opt.metrics[i].c_str());
    }
    std::printf("\n");
    return kExitOk;
  }
  if (opt.list) return run_list(opt);
  if (opt.kernels_only) return run_kernels_only(opt);
  if (!opt.chip.empty()) return run_host_only(opt);
  return run_profile(opt);
}
