#include "prof/device_peaks.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace tinyllama::prof {
namespace {

struct Entry {
  std::vector<const char*> all_of;   // every one must appear in the name
  std::vector<const char*> none_of;  // none may
  DevicePeak peak;
};

// NVIDIA's datasheet figures, dense (the sparse tensor figures are twice
// these). Variants that share a chip name come before the general entry.
// The clocks: per-clock rate x units x clock gives each figure, e.g. H100 SXM
// 528 tensor cores x 1024 bf16 FLOP x 1830 MHz = 989.4 TFLOP/s and 16896
// fp32 lanes x 2 x 1980 MHz = 66.9; A100 432 x 512 x 1410 = 312 and 6912 x 2 x
// 1410 = 19.5; H100 PCIe 456 x 1024 x 1620 = 756 and 14592 x 2 x 1755 = 51.2.
// The NVL parts' clocks are left unknown.
const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = {
      {{"h100", "nvl"}, {}, {"H100 NVL", 60.0, 835.0, 835.0, 3900.0}},
      {{"h100", "pcie"}, {}, {"H100 PCIe", 51.0, 756.0, 756.0, 2000.0, 1755.0, 1620.0}},
      {{"h100"}, {}, {"H100 SXM", 67.0, 989.0, 989.0, 3350.0, 1980.0, 1830.0}},
      {{"h200", "nvl"}, {}, {"H200 NVL", 60.0, 835.0, 835.0, 4800.0}},
      {{"h200"}, {}, {"H200 SXM", 67.0, 989.0, 989.0, 4800.0, 1980.0, 1830.0}},
      {{"a100", "80gb", "pcie"},
       {},
       {"A100 80GB PCIe", 19.5, 312.0, 312.0, 1935.0, 1410.0, 1410.0}},
      {{"a100", "80gb"}, {}, {"A100 80GB SXM", 19.5, 312.0, 312.0, 2039.0, 1410.0, 1410.0}},
      {{"a100"}, {"80gb"}, {"A100 40GB", 19.5, 312.0, 312.0, 1555.0, 1410.0, 1410.0}},
  };
  return entries;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::optional<DevicePeak> find_device_peak(const std::string& device_description) {
  const std::string name = lower(device_description);
  for (const Entry& e : table()) {
    const bool all = std::all_of(e.all_of.begin(), e.all_of.end(),
                                 [&](const char* w) { return name.find(w) != std::string::npos; });
    const bool none = std::none_of(e.none_of.begin(), e.none_of.end(), [&](const char* w) {
      return name.find(w) != std::string::npos;
    });
    if (all && none) return e.peak;
  }
  return std::nullopt;
}

double peak_tflops(const DevicePeak& peak, Precision precision) {
  switch (precision.compute) {
    case DType::F32:
      return peak.fp32_tflops;
    case DType::BF16:
      return peak.bf16_tflops;
    case DType::F16:
      return peak.fp16_tflops;
    case DType::F64:
      return 0;
  }
  return 0;
}

double peak_clock_mhz(const DevicePeak& peak, Precision precision) {
  switch (precision.compute) {
    case DType::F32:
      return peak.fp32_clock_mhz;
    case DType::BF16:
    case DType::F16:
      return peak.tensor_clock_mhz;
    case DType::F64:
      return 0;
  }
  return 0;
}

}  // namespace tinyllama::prof
