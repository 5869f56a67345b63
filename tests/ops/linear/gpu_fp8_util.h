#pragma once
// Shared by the FP8 GPU tests (gpu_fp8_cast_test.cc, gpu_fp8_gemm_test.cc):
// fixtures that skip without a device or below sm_89 (no FP8 tensor cores,
// no cvt to FP8 in hardware), raw device buffers, and random host tensors
// as the device holds them (fp32, or rounded to bf16).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/narrow_float.h"
#include "core/rng.h"
#include "cuda/gpu_test_util.h"
#include "ops/linear/cpu_fp8.h"
#include "ops/linear/cuda_gemm_fp8.h"
#include "ops/linear/fp8_tensor.h"

namespace tinyllama::gpu_test {

inline constexpr const char* kNoFp8Message =
    "GPU below sm_89 (no FP8 tensor cores): FP8 test SKIPPED";

// The reason to skip an FP8 test here, or "".
inline std::string fp8_skip_reason() {
  if (!cuda_device_available()) return kSkipMessage;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || !cuda::fp8_gemm_supported(device)) {
    return kNoFp8Message;
  }
  return "";
}

class Fp8GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = fp8_skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

template <typename Param>
class Fp8GpuParamTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const std::string why = fp8_skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

inline const char* format_label(Fp8Format f) {
  return f == Fp8Format::E4M3 ? "E4M3" : "E5M2";
}

// Device memory of `bytes` bytes, filled with `fill` (0xff: NaN in every
// float dtype, poison for outputs).
class DeviceMem {
 public:
  explicit DeviceMem(std::size_t bytes, int fill = 0xff) : bytes_(bytes < 16 ? 16 : bytes) {
    EXPECT_EQ(cudaMalloc(&p_, bytes_), cudaSuccess);
    EXPECT_EQ(cudaMemset(p_, fill, bytes_), cudaSuccess);
  }
  ~DeviceMem() { cudaFree(p_); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* src, std::size_t n) {
    ASSERT_LE(n, bytes_);
    ASSERT_EQ(cudaMemcpy(p_, src, n, cudaMemcpyHostToDevice), cudaSuccess);
  }
  template <typename T>
  std::vector<T> download(std::size_t count) const {
    std::vector<T> out(count);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), p_, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  void* p_ = nullptr;
  std::size_t bytes_;
};

// Normal draws with a few outliers of either sign, never exactly zero, as
// fp8_reference_test.cc draws them; rounded to bf16 when `t` is BF16, so
// that `values` are what the device holds.
inline std::vector<float> random_values(std::size_t n, double scale, DType t, Rng& rng) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    do {
      x[i] = static_cast<float>(scale * rng.normal());
      if (i % 97 == 5) x[i] *= 30.0f;
      if (t == DType::BF16)
        x[i] = static_cast<float>(bf16_bits_to_double(round_to_bf16_bits(x[i])));
    } while (x[i] == 0.0f);
  }
  return x;
}

// values[r * cols + c] stored with row stride ld in dtype t (F32 or BF16),
// the padding filled with 0xff bytes.
inline std::vector<unsigned char> host_bytes(const std::vector<float>& values, std::int64_t rows,
                                             std::int64_t cols, std::int64_t ld, DType t) {
  const std::size_t es = dtype_size(t);
  std::vector<unsigned char> out(static_cast<std::size_t>(rows * ld) * es, 0xff);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = values[static_cast<std::size_t>(r * cols + c)];
      unsigned char* p = out.data() + static_cast<std::size_t>(r * ld + c) * es;
      if (t == DType::BF16) {
        const std::uint16_t bits = round_to_bf16_bits(v);
        std::memcpy(p, &bits, sizeof(bits));
      } else {
        std::memcpy(p, &v, sizeof(v));
      }
    }
  }
  return out;
}

// An FP8 tensor of rows x cols with both copies packed (poisoned), its
// scale block set to `scale` with a recorded amax of `amax` (the history
// zero): what the producers that write codes (the SwiGLU's, the norm's)
// are checked with against the cast of their stored result.
struct Fp8Buffers {
  DeviceMem codes, codes_t, scalars;
  Fp8Tensor q;
  Fp8Buffers(std::int64_t rows, std::int64_t cols, Fp8Format f, float scale, float amax)
      : codes(static_cast<std::size_t>(rows * cols)),
        codes_t(static_cast<std::size_t>(rows * cols)),
        scalars(kFp8Block * sizeof(float)) {
    std::vector<float> block(kFp8Block, 0.0f);
    block[kFp8Scale] = scale;
    block[kFp8Inverse] = cpu::fp8_inverse_scale(scale);
    block[kFp8Amax] = amax;
    scalars.upload(block.data(), block.size() * sizeof(float));
    q = Fp8Tensor{f,    rows,
                  cols, codes.get<std::uint8_t>(),
                  cols, codes_t.get<std::uint8_t>(),
                  rows, scalars.get<float>()};
  }
};

// A test name's word for where a scale comes from.
inline const char* scale_label(Fp8ScaleFrom from) {
  switch (from) {
    case Fp8ScaleFrom::History:
      return "delayed";
    case Fp8ScaleFrom::Kept:
      return "kept";
    case Fp8ScaleFrom::Amax:
      return "current";
  }
  return "?";
}

// Both copies' codes and the scale block, byte for byte.
inline void expect_same_fp8(const Fp8Buffers& got, const Fp8Buffers& want,
                            const std::string& what) {
  const std::size_t n = got.codes.bytes();
  EXPECT_EQ(got.codes.download<std::uint8_t>(n), want.codes.download<std::uint8_t>(n))
      << what << ": row-major codes";
  EXPECT_EQ(got.codes_t.download<std::uint8_t>(n), want.codes_t.download<std::uint8_t>(n))
      << what << ": transposed codes";
  EXPECT_EQ(got.scalars.download<float>(kFp8Block), want.scalars.download<float>(kFp8Block))
      << what << ": the scale block";
}

// The scale a delayed history might hold for the producers' tests: below
// the tensor's own amax, so the largest values saturate; the amax recorded
// so far below it too.
inline constexpr float kHeldScale = 96.0f;
inline constexpr float kEarlierAmax = 0.25f;

}  // namespace tinyllama::gpu_test
