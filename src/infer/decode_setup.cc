#include "infer/decode_setup.h"

#include "core/errors.h"

namespace tinyllama {

DecodeSetup resolve_decode_setup(const DecodeFlags& flags, bool cuda_present) {
  DecodeSetup s;
  if (flags.device == "cpu") {
    s.device = DeviceKind::Cpu;
  } else if (flags.device == "cuda") {
    if (!cuda_present) {
      throw RuntimeFailure("--device cuda: no CUDA device found; use --device cpu");
    }
    s.device = DeviceKind::Cuda;
  } else if (flags.device == "auto") {
    s.device = cuda_present ? DeviceKind::Cuda : DeviceKind::Cpu;
  } else {
    throw UsageError("--device " + flags.device + ": allowed values are cpu, cuda, auto");
  }
  const bool cuda = s.device == DeviceKind::Cuda;

  if (flags.dtype.empty()) {
    s.dtype = cuda ? DType::BF16 : DType::F32;
  } else if (flags.dtype == "float32") {
    s.dtype = DType::F32;
  } else if (flags.dtype == "bfloat16") {
    if (!cuda) {
      throw UsageError(
          "--dtype bfloat16: the CPU decoder computes in float32 or float64 (use "
          "--device cuda)");
    }
    s.dtype = DType::BF16;
  } else if (flags.dtype == "float64") {
    if (cuda) {
      throw UsageError("--dtype float64: the CUDA decoder computes in bfloat16 or float32");
    }
    s.dtype = DType::F64;
  } else {
    throw UsageError("--dtype " + flags.dtype + ": allowed values are float32, bfloat16, float64");
  }

  if (!cuda && (!flags.gemv.empty() || flags.no_graph)) {
    throw UsageError(std::string(flags.no_graph ? "--no-graph" : "--gemv") +
                     ": only with --device cuda (it picks how CUDA batch-1 steps run)");
  }
  if (flags.gemv.empty() || flags.gemv == "fused") {
    s.own_gemv = s.fused = s.programmatic = true;
  } else if (flags.gemv == "fused-nopdl") {
    s.own_gemv = s.fused = true;
    s.programmatic = false;
  } else if (flags.gemv == "own") {
    s.own_gemv = true;
    s.fused = false;
  } else if (flags.gemv == "cublaslt") {
    s.own_gemv = s.fused = false;
  } else {
    throw UsageError("--gemv " + flags.gemv +
                     ": allowed values are fused, fused-nopdl, own, cublaslt");
  }
  s.graph = !flags.no_graph;
  return s;
}

}  // namespace tinyllama
