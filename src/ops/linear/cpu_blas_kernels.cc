#include "ops/linear/cpu_blas_kernels.h"

#include <array>

namespace tinyllama::cpu {

CpuFeatures this_cpu() {
  CpuFeatures f;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  return f;
}

std::string better_blas_core(const std::string& chosen, const CpuFeatures& cpu) {
  static constexpr std::array<const char*, 6> kFallbacks = {"Prescott",   "Core2",   "Penryn",
                                                            "Dunnington", "Nehalem", "Sandybridge"};
  bool fallback = false;
  for (const char* name : kFallbacks) fallback = fallback || chosen == name;
  if (!fallback) return "";
  if (cpu.avx512_bf16) return "Cooperlake";
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return "";
}

}  // namespace tinyllama::cpu
