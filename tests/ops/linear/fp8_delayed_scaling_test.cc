// Delayed FP8 scaling on the CPU (cpu_fp8_linear.h): a History cast uses
// the scale the block holds and raises its amax to the tensor's; the
// step's update pushes the amax onto the history, drops the oldest, and
// scales from the history's maximum -- each against values worked out
// here from cpu_fp8's codec and fp8_scale_for, never from the code under
// test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "ops/linear/cpu_fp8.h"
#include "ops/linear/cpu_fp8_linear.h"

namespace tinyllama::testing {
namespace {

std::vector<float> random_values(std::int64_t n, Rng& rng, double sigma) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) {
    do {
      x = static_cast<float>(rng.normal() * sigma);
    } while (x == 0.0f);
  }
  return v;
}

double largest_abs(const std::vector<float>& v) {
  double m = 0;
  for (const float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

struct HostTensor {
  std::vector<std::uint8_t> codes, codes_t;
  std::vector<float> block = std::vector<float>(kFp8Block, 0.0f);
  Fp8Tensor t;
  HostTensor(Fp8Format f, std::int64_t rows, std::int64_t cols)
      : codes(static_cast<std::size_t>(rows * cols)), codes_t(codes.size()) {
    t = Fp8Tensor{f, rows, cols, codes.data(), cols, codes_t.data(), rows, block.data()};
  }
};

TEST(Fp8DelayedScaling, HistoryCastUsesTheHeldScaleAndRaisesTheAmax) {
  Rng rng(31);
  for (const Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    const std::int64_t rows = 13, cols = 21;
    const std::vector<float> v = random_values(rows * cols, rng, 3.0);
    const double tensor_amax = largest_abs(v);
    // An amax recorded earlier in the step: below this tensor's, then above.
    for (const float earlier : {static_cast<float>(tensor_amax / 4), 1e4f}) {
      HostTensor q(f, rows, cols);
      q.block[kFp8Scale] = 7.25f;
      q.block[kFp8Inverse] = 1.0f / 7.25f;
      q.block[kFp8Amax] = earlier;
      q.block[kFp8HistoryAt] = 5.0f;
      cpu::quantize_fp8_tensor(Mat(const_cast<float*>(v.data()), DType::F32, rows, cols), q.t,
                               Fp8ScaleFrom::History);
      EXPECT_EQ(q.block[kFp8Scale], 7.25f);
      EXPECT_EQ(q.block[kFp8Inverse], 1.0f / 7.25f);
      EXPECT_EQ(q.block[kFp8HistoryAt], 5.0f);  // the history waits for the update
      EXPECT_EQ(q.block[kFp8Amax], std::max(earlier, static_cast<float>(tensor_amax)));
      std::vector<std::uint8_t> want(v.size());
      cpu::quantize_fp8(v.data(), v.size(), 7.25f, f, want.data());
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          ASSERT_EQ(q.codes[r * cols + c], want[r * cols + c]);
          ASSERT_EQ(q.codes_t[c * rows + r], want[r * cols + c]);
        }
      }
    }
  }
}

TEST(Fp8DelayedScaling, HistoryCastRecordsANan) {
  std::vector<float> v = {1.0f, -2.0f, std::numeric_limits<float>::quiet_NaN(), 0.5f};
  HostTensor q(Fp8Format::E5M2, 1, 4);
  q.block[kFp8Scale] = 1.0f;
  q.block[kFp8Amax] = 3.0f;
  cpu::quantize_fp8_tensor(Mat(v.data(), DType::F32, 1, 4), q.t, Fp8ScaleFrom::History);
  EXPECT_TRUE(std::isnan(q.block[kFp8Amax]));
}

// The blocks as the update should leave them, worked out in double.
void expect_updated(const std::vector<float>& before, const std::vector<float>& after, int count,
                    Fp8Format f) {
  for (int i = 0; i < count; ++i) {
    const float* b = before.data() + static_cast<std::ptrdiff_t>(i) * kFp8Block;
    const float* a = after.data() + static_cast<std::ptrdiff_t>(i) * kFp8Block;
    EXPECT_EQ(a[kFp8HistoryAt], b[kFp8Amax]) << "block " << i;
    double most = b[kFp8Amax];
    for (int h = 1; h < kFp8History; ++h) {
      EXPECT_EQ(a[kFp8HistoryAt + h], b[kFp8HistoryAt + h - 1]) << "block " << i << " h " << h;
      most = std::max(most, static_cast<double>(b[kFp8HistoryAt + h - 1]));
    }
    const double want_scale = most > 0 ? cpu::fp8_max_finite(f) / most : 1.0;
    EXPECT_EQ(a[kFp8Scale], static_cast<float>(want_scale)) << "block " << i;
    EXPECT_EQ(a[kFp8Inverse], 1.0f / a[kFp8Scale]) << "block " << i;
    EXPECT_EQ(a[kFp8Amax], 0.0f) << "block " << i;
  }
}

TEST(Fp8DelayedScaling, UpdatePushesTheAmaxAndScalesFromTheHistorysMaximum) {
  Rng rng(32);
  for (const Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    const int count = 5;
    std::vector<float> blocks(static_cast<std::size_t>(count) * kFp8Block);
    for (float& x : blocks) x = static_cast<float>(std::fabs(rng.normal()) * 10 + 0.1);
    // Block 1: its largest amax is the oldest, which the update drops.
    blocks[kFp8Block + kFp8HistoryAt + kFp8History - 1] = 1e6f;
    // Block 2: a history of zeroes and a zero amax (a tensor of zeroes): scale 1.
    for (int h = 0; h < kFp8Block; ++h) blocks[2 * kFp8Block + h] = 0.0f;
    const std::vector<float> before = blocks;
    cpu::update_fp8_scales(blocks.data(), count, f);
    expect_updated(before, blocks, count, f);
    EXPECT_EQ(blocks[2 * kFp8Block + kFp8Scale], 1.0f);
    // The dropped 1e6 no longer bounds block 1's scale (its others are below 100).
    EXPECT_GT(blocks[kFp8Block + kFp8Scale], cpu::fp8_max_finite(f) / 100);
  }
}

TEST(Fp8DelayedScaling, AScaleFollowsTheAmaxesOfTheStepsBefore) {
  // One tensor doubling each step: step n's cast scales from the largest
  // amax of the steps before it, so the doubled tensor's largest elements
  // saturate at the largest finite code while its smaller ones keep their
  // values.
  const std::int64_t n = 8;
  HostTensor q(Fp8Format::E4M3, 1, n);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int step = 0; step < 4; ++step) {
    for (std::int64_t i = 0; i < n; ++i) {
      v[static_cast<std::size_t>(i)] = static_cast<float>((i + 1) * std::ldexp(1.0, step));
    }
    const Mat x(v.data(), DType::F32, 1, n);
    if (step == 0) {
      cpu::quantize_fp8_tensor(x, q.t, Fp8ScaleFrom::Amax);  // no history yet
    } else {
      cpu::update_fp8_scales(q.block.data(), 1, Fp8Format::E4M3);
      cpu::quantize_fp8_tensor(x, q.t, Fp8ScaleFrom::History);
    }
    const double history_max = 8 * std::ldexp(1.0, step == 0 ? 0 : step - 1);
    EXPECT_EQ(q.block[kFp8Scale], cpu::fp8_scale_for(history_max, Fp8Format::E4M3)) << step;
    EXPECT_EQ(cpu::fp8_value(q.codes[n - 1], Fp8Format::E4M3), 448.0) << step;
    const double first = cpu::fp8_value(q.codes[0], Fp8Format::E4M3) / q.block[kFp8Scale];
    EXPECT_EQ(first, v[0]) << step << ": a power of two below the range is exact";
  }
}

}  // namespace
}  // namespace tinyllama::testing
