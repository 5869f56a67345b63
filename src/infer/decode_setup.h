#pragma once
// What `generate` decodes on and in, from its flags: the device (cpu, cuda,
// or auto: CUDA when a device is present) and the dtype (bfloat16 by
// default on CUDA, float32 on the CPU). Apart from the CLI so the rules are
// unit-tested without a GPU.
#include <string>

#include "core/dtype.h"
#include "model/step_plan.h"

namespace tinyllama {

struct DecodeSetup {
  DeviceKind device = DeviceKind::Cpu;
  DType dtype = DType::F32;
  bool own_gemv = true;      // CUDA batch-1 steps: our GEMV (else cuBLASLt)
  bool fused = true;         // with own_gemv: the norms, RoPE, SwiGLU folded into it
  bool programmatic = true;  // with fused: its kernels launched with PDL
  bool graph = true;         // CUDA batch-1 steps: one captured graph per token
};

struct DecodeFlags {
  std::string device = "auto";  // cpu | cuda | auto
  std::string dtype;            // "" (the device's default) | float32 | bfloat16 | float64
  std::string gemv;             // "" (fused) | fused | fused-nopdl | own | cublaslt; CUDA only
  bool no_graph = false;        // CUDA only
};

// UsageError naming the flag for a value it does not take or a combination
// the device cannot run; RuntimeFailure for --device cuda without a device.
DecodeSetup resolve_decode_setup(const DecodeFlags& flags, bool cuda_present);

}  // namespace tinyllama
