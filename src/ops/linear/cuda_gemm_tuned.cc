// The process-wide store of GEMM algorithms chosen by timing, and
// GemmRunner's export and import of it as text (cuda_gemm_tuned.h).
#include "ops/linear/cuda_gemm_tuned.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "device/cuda_check.h"
#include "ops/linear/cuda_gemm.h"

namespace tinyllama::cuda {

TunedGemmAlgos& tuned_gemm_algos() {
  static TunedGemmAlgos t;
  return t;
}

void GemmRunner::forget_tuned_choices() {
  TunedGemmAlgos& tuned = tuned_gemm_algos();
  const std::lock_guard<std::mutex> lock(tuned.mutex);
  tuned.algos.clear();
}

namespace {

int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

std::string tuning_signature() {
  const int device = current_device();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return "cublaslt " + std::to_string(cublasLtGetVersion()) + "\ngpu " + prop.name + "\n";
}

constexpr const char* kTuningHeader = "tinyllama-gemm-tuning 1\n";

}  // namespace

std::string GemmRunner::export_tuned_choices() {
  std::string out = std::string(kTuningHeader) + tuning_signature();
  TunedGemmAlgos& tuned = tuned_gemm_algos();
  const std::lock_guard<std::mutex> lock(tuned.mutex);
  // This device's choices; the key's last field, the device, is written but
  // not read back: an import applies them to the importing device (another
  // rank's GPU of the same kind).
  const int device = current_device();
  for (const auto& [key, algo] : tuned.algos) {
    if (key.back() != device) continue;
    for (std::int64_t field : key) out += std::to_string(field) + " ";
    const auto* bytes = reinterpret_cast<const unsigned char*>(&algo);
    char hex[3];
    for (std::size_t i = 0; i < sizeof(algo); ++i) {
      std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
      out += hex;
    }
    out += "\n";
  }
  return out;
}

std::string GemmRunner::import_tuned_choices(const std::string& text) {
  const std::string head = std::string(kTuningHeader) + tuning_signature();
  if (text.compare(0, head.size(), head) != 0) {
    return "the GEMM choices were tuned with another cuBLASLt or GPU (or are damaged)";
  }
  std::map<GemmTuningKey, cublasLtMatmulAlgo_t> parsed;
  std::size_t pos = head.size();
  while (pos < text.size()) {
    const std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) return "the GEMM choices are damaged (an unfinished line)";
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    GemmTuningKey key{};
    std::size_t at = 0;
    for (std::int64_t& field : key) {
      const std::size_t space = line.find(' ', at);
      if (space == std::string::npos) return "the GEMM choices are damaged (a short key)";
      char* stop = nullptr;
      field = std::strtoll(line.c_str() + at, &stop, 10);
      if (stop != line.c_str() + space) return "the GEMM choices are damaged (a key field)";
      at = space + 1;
    }
    cublasLtMatmulAlgo_t algo{};
    if (line.size() - at != 2 * sizeof(algo)) return "the GEMM choices are damaged (an algorithm)";
    auto* bytes = reinterpret_cast<unsigned char*>(&algo);
    for (std::size_t i = 0; i < sizeof(algo); ++i) {
      const std::string pair = line.substr(at + 2 * i, 2);
      char* stop = nullptr;
      bytes[i] = static_cast<unsigned char>(std::strtoul(pair.c_str(), &stop, 16));
      if (stop != pair.c_str() + 2) return "the GEMM choices are damaged (not hex)";
    }
    key.back() = current_device();
    parsed[key] = algo;
  }
  TunedGemmAlgos& tuned = tuned_gemm_algos();
  const std::lock_guard<std::mutex> lock(tuned.mutex);
  for (const auto& [key, algo] : parsed) tuned.algos[key] = algo;
  tuned.imports.fetch_add(1, std::memory_order_release);
  return "";
}

}  // namespace tinyllama::cuda
