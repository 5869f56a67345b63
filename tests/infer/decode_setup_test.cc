// generate's device and dtype rules (infer/decode_setup.h), with and
// without a CUDA device present.
#include "infer/decode_setup.h"

#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"

namespace tinyllama {
namespace {

DecodeFlags flags(const std::string& device, const std::string& dtype = "") {
  DecodeFlags f;
  f.device = device;
  f.dtype = dtype;
  return f;
}

// The message of the exception E that resolve_decode_setup throws, "" if none.
template <typename E>
std::string error_of(const DecodeFlags& f, bool cuda_present) {
  try {
    resolve_decode_setup(f, cuda_present);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(DecodeSetup, AutoTakesTheGpuWhenThereIsOneWithItsDefaultDtype) {
  const DecodeSetup gpu = resolve_decode_setup(flags("auto"), true);
  EXPECT_EQ(gpu.device, DeviceKind::Cuda);
  EXPECT_EQ(gpu.dtype, DType::BF16);
  EXPECT_TRUE(gpu.own_gemv);
  EXPECT_TRUE(gpu.fused);
  EXPECT_TRUE(gpu.graph);
  const DecodeSetup cpu = resolve_decode_setup(flags("auto"), false);
  EXPECT_EQ(cpu.device, DeviceKind::Cpu);
  EXPECT_EQ(cpu.dtype, DType::F32);
  EXPECT_EQ(resolve_decode_setup(flags("cpu"), true).device, DeviceKind::Cpu);
  EXPECT_EQ(resolve_decode_setup(flags("cuda", "float32"), true).dtype, DType::F32);
  EXPECT_EQ(resolve_decode_setup(flags("cpu", "float64"), false).dtype, DType::F64);
}

TEST(DecodeSetup, TimingFlagsPickTheBatchOnePath) {
  DecodeFlags f = flags("cuda");
  f.gemv = "cublaslt";
  f.no_graph = true;
  const DecodeSetup s = resolve_decode_setup(f, true);
  EXPECT_FALSE(s.own_gemv);
  EXPECT_FALSE(s.fused);
  EXPECT_FALSE(s.graph);
  f.gemv = "own";
  EXPECT_TRUE(resolve_decode_setup(f, true).own_gemv);
  EXPECT_FALSE(resolve_decode_setup(f, true).fused);
  f.gemv = "fused";
  EXPECT_TRUE(resolve_decode_setup(f, true).own_gemv);
  EXPECT_TRUE(resolve_decode_setup(f, true).fused);
  EXPECT_TRUE(resolve_decode_setup(f, true).programmatic);
  f.gemv = "fused-nopdl";
  EXPECT_TRUE(resolve_decode_setup(f, true).fused);
  EXPECT_FALSE(resolve_decode_setup(f, true).programmatic);
}

TEST(DecodeSetup, RefusalsNameTheFlag) {
  EXPECT_NE(error_of<RuntimeFailure>(flags("cuda"), false).find("--device cuda: no CUDA device"),
            std::string::npos);
  EXPECT_NE(error_of<UsageError>(flags("tpu"), true).find("--device tpu: allowed values are"),
            std::string::npos);
  EXPECT_NE(error_of<UsageError>(flags("cpu", "bfloat16"), true).find("--dtype bfloat16: the CPU"),
            std::string::npos);
  EXPECT_NE(error_of<UsageError>(flags("auto", "float64"), true).find("--dtype float64: the CUDA"),
            std::string::npos);
  EXPECT_NE(error_of<UsageError>(flags("cuda", "float16"), true).find("--dtype float16: allowed"),
            std::string::npos);
  DecodeFlags f = flags("cuda");
  f.gemv = "cutlass";
  EXPECT_NE(error_of<UsageError>(f, true).find(
                "--gemv cutlass: allowed values are fused, fused-nopdl, own, cublaslt"),
            std::string::npos);
  f = flags("auto");
  f.no_graph = true;  // auto resolved to the CPU: the flag means nothing there
  EXPECT_NE(error_of<UsageError>(f, false).find("--no-graph: only with --device cuda"),
            std::string::npos);
  f.no_graph = false;
  f.gemv = "own";
  EXPECT_NE(error_of<UsageError>(f, false).find("--gemv: only with --device cuda"),
            std::string::npos);
}

}  // namespace
}  // namespace tinyllama
