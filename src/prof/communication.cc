#include "prof/communication.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "prof/kernel_stats.h"
#include "prof/overlap.h"

namespace tinyllama::prof {
namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

void drop_prefix(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) == prefix) s.remove_prefix(prefix.size());
}

}  // namespace

bool is_communication_kernel(const std::string& name) {
  // nvcc names a kernel of internal linkage "__nv_static_<n>__<hash>_<file>__"
  // followed by its mangled name (NCCL's one-rank reduction is one).
  std::string mangled = name;
  if (mangled.rfind("__nv_static_", 0) == 0) {
    const std::size_t at = mangled.find("__Z");
    if (at != std::string::npos) mangled = mangled.substr(at + 1);
  }
  const std::string readable = demangle(mangled);
  std::string_view s = readable;
  // A template kernel's demangled name begins with its return type.
  drop_prefix(s, "void ");
  drop_prefix(s, "(anonymous namespace)::");
  return starts_with_nocase(s, "nccl") || s.substr(0, 14) == "oneRankReduce<";
}

std::vector<bool> communication_kernels(const std::vector<KernelRecord>& kernels) {
  std::unordered_map<std::string, bool> known;  // demangling costs more than a lookup
  std::vector<bool> out;
  out.reserve(kernels.size());
  for (const KernelRecord& k : kernels) {
    auto it = known.find(k.name);
    if (it == known.end()) it = known.emplace(k.name, is_communication_kernel(k.name)).first;
    out.push_back(it->second);
  }
  return out;
}

std::vector<std::int64_t> hidden_behind_compute(const std::vector<KernelRecord>& kernels,
                                                const std::vector<bool>& communication) {
  std::vector<bool> compute(communication.size());
  for (std::size_t i = 0; i < communication.size(); ++i) compute[i] = !communication[i];
  return time_beside_other_streams(kernels, compute, communication);
}

CommunicationFigures communication_figures(const GpuActivity& gpu, const Attribution& a) {
  CommunicationFigures f;
  const std::vector<bool> communication = communication_kernels(gpu.kernels);
  const std::vector<std::int64_t> hidden = hidden_behind_compute(gpu.kernels, communication);
  for (std::size_t i = 0; i < gpu.kernels.size(); ++i) {
    if (!communication[i] || !a.kernel_in_step[i]) continue;
    const std::int64_t ns = std::max<std::int64_t>(gpu.kernels[i].duration_ns(), 0);
    for (CommunicationTime* t : {&f.total, &f.by_op[op_kind_key(a.kernel_ops[i])]}) {
      ++t->kernels;
      t->kernel_ns += ns;
      t->hidden_ns += hidden[i];
    }
  }
  return f;
}

}  // namespace tinyllama::prof
