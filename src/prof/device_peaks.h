#pragma once
// Dense peak rates of the GPUs tinyllama is measured on, for MFU and the
// roofline. Looked up by the device's name; a device not in the table gets
// no MFU rather than a guessed one.
#include <optional>
#include <string>

#include "model/config.h"

namespace tinyllama::prof {

struct DevicePeak {
  std::string name;          // "H100 SXM"
  double fp32_tflops = 0;    // plain fp32 on the CUDA cores (tinyllama's fp32 runs no TF32)
  double bf16_tflops = 0;    // dense tensor-core bf16 (no sparsity)
  double fp16_tflops = 0;    // dense tensor-core fp16
  double bandwidth_gbs = 0;  // device memory, GB/s (1e9 bytes)
  // The SM clocks the figures above are computed at (MHz; 0: not known): the
  // peaks are per-clock rates times these, so a GPU held below them by its
  // power cap peaks lower.
  double fp32_clock_mhz = 0;
  double tensor_clock_mhz = 0;
};

// By the device description ("NVIDIA H100 80GB HBM3 (79.2 GiB, sm_90)");
// nullopt when the table does not know it.
std::optional<DevicePeak> find_device_peak(const std::string& device_description);

// The peak for the precision's compute dtype, TFLOP/s; 0 when there is none
// (fp64 gradient-check runs).
double peak_tflops(const DevicePeak& peak, Precision precision);

// The clock behind peak_tflops for the precision, MHz; 0 when not known.
double peak_clock_mhz(const DevicePeak& peak, Precision precision);

}  // namespace tinyllama::prof
