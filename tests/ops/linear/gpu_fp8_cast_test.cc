// The FP8 scaling kernels (ops/linear/cuda_fp8_cast.h) against their CPU
// twins (ops/linear/cpu_fp8.h), bit for bit: the amax exactly (NaN when an
// element is NaN), the scale and its inverse from a device amax (edge
// cases: 0, inf, NaN, an amax so small the scale clamps to FLT_MAX), and
// the casts of fp32 and bf16 tensors to E4M3 and E5M2 codes, at a fitting
// and a saturating scale, with the transposed copy; odd shapes (casts have
// no multiple-of-16 rule), padded row strides, padding left untouched.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_fp8_util.h"
#include "ops/linear/cpu_fp8_linear.h"
#include "ops/linear/cuda_fp8_cast.h"
#include "ops/linear/fp8_tensor.h"

namespace tinyllama::gpu_test {
namespace {

struct CastShape {
  std::int64_t rows, cols, pad;  // pad: extra elements per row of the input and outputs
};

// 128 x 192, 64 x 128 + 16 and 1024 x 2048 take the tiled cast_transpose
// (whole 64 x 64 tiles, aligned rows); 192 x 64 + 8 does not (its transposed
// copy's rows are 8-byte aligned) and takes the one-element variant.
const CastShape kCastShapes[] = {{16, 16, 0},  {48, 80, 0},    {37, 53, 5},   {1040, 2064, 16},
                                 {1, 1, 0},    {33, 8, 8},     {128, 192, 0}, {64, 128, 16},
                                 {192, 64, 8}, {1024, 2048, 0}};

using CastParam = std::tuple<DType, Fp8Format, CastShape>;

class GpuFp8Cast : public Fp8GpuParamTest<CastParam> {};

// One input on both sides: host values and the device copy (ld = cols + pad).
struct CastInput {
  std::vector<float> values;
  DeviceMem mem;
  Mat x;
  CastInput(const CastShape& s, DType t, Rng& rng)
      : values(random_values(static_cast<std::size_t>(s.rows * s.cols), 1.0, t, rng)),
        mem(static_cast<std::size_t>(s.rows * (s.cols + s.pad)) * dtype_size(t)) {
    const auto bytes = host_bytes(values, s.rows, s.cols, s.cols + s.pad, t);
    mem.upload(bytes.data(), bytes.size());
    x = Mat(mem.get(), t, s.rows, s.cols, s.cols + s.pad);
  }
};

// Whether rows x cols codes at row stride ld equal want (row-major, no
// padding) and the padding after each row kept its 0xff poison.
void expect_codes(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                  std::int64_t rows, std::int64_t cols, std::int64_t ld, const std::string& what) {
  std::int64_t wrong = 0, pad_touched = 0;
  std::string first;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < ld; ++c) {
      const std::uint8_t g = got[static_cast<std::size_t>(r * ld + c)];
      if (c >= cols) {
        pad_touched += g != 0xff;
        continue;
      }
      const std::uint8_t w = want[static_cast<std::size_t>(r * cols + c)];
      if (g != w && wrong++ == 0) {
        first = "(" + std::to_string(r) + ", " + std::to_string(c) + "): got " + std::to_string(g) +
                " want " + std::to_string(w);
      }
    }
  }
  EXPECT_EQ(wrong, 0) << what << ": codes differ from the CPU codec, first at " << first;
  EXPECT_EQ(pad_touched, 0) << what << ": wrote into the row padding";
}

std::vector<std::uint8_t> transpose(const std::vector<std::uint8_t>& v, std::int64_t rows,
                                    std::int64_t cols) {
  std::vector<std::uint8_t> t(v.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      t[static_cast<std::size_t>(c * rows + r)] = v[static_cast<std::size_t>(r * cols + c)];
    }
  }
  return t;
}

TEST_P(GpuFp8Cast, AmaxScaleAndCastsMatchTheCpu) {
  const auto [t, f, s] = GetParam();
  Rng rng(20261128);
  CastInput in(s, t, rng);
  const std::size_t n = in.values.size();

  DeviceMem amax(sizeof(float)), scales(4 * sizeof(float));
  cuda::fp8_amax(in.x, amax.get<float>(), nullptr);
  const double want_amax = cpu::amax(in.values.data(), n);
  EXPECT_EQ(amax.download<float>(1)[0], static_cast<float>(want_amax)) << "amax";

  // Margin 0 (the largest element on the largest code) and margin -2 (4x
  // too large: the top of the tensor saturates).
  for (const int margin : {0, -2}) {
    SCOPED_TRACE("margin " + std::to_string(margin));
    float* scale = scales.get<float>();
    cuda::fp8_scale_from_amax(amax.get<float>(), f, margin, scale, scale + 1, nullptr);
    const auto got = scales.download<float>(2);
    const float want_scale = cpu::fp8_scale_for(want_amax, f, margin);
    EXPECT_EQ(got[0], want_scale) << "scale";
    EXPECT_EQ(got[1], cpu::fp8_inverse_scale(want_scale)) << "inverse scale";

    std::vector<std::uint8_t> want(n);
    cpu::quantize_fp8(in.values.data(), n, want_scale, f, want.data());
    const std::int64_t ld = s.cols + s.pad, ld_t = s.rows + s.pad;
    DeviceMem out(static_cast<std::size_t>(s.rows * ld)),
        out2(static_cast<std::size_t>(s.rows * ld));
    DeviceMem out_t(static_cast<std::size_t>(s.cols * ld_t));
    cuda::fp8_cast(in.x, scale, f, cuda::Fp8View{out.get<std::uint8_t>(), ld}, nullptr);
    expect_codes(out.download<std::uint8_t>(out.bytes()), want, s.rows, s.cols, ld, "fp8_cast");

    cuda::fp8_cast_transpose(in.x, scale, f, cuda::Fp8View{out2.get<std::uint8_t>(), ld},
                             cuda::Fp8View{out_t.get<std::uint8_t>(), ld_t}, nullptr);
    expect_codes(out2.download<std::uint8_t>(out2.bytes()), want, s.rows, s.cols, ld,
                 "fp8_cast_transpose, direct copy");
    expect_codes(out_t.download<std::uint8_t>(out_t.bytes()), transpose(want, s.rows, s.cols),
                 s.cols, s.rows, ld_t, "fp8_cast_transpose, transposed copy");
  }
}

// The transposed copy alone (no direct output).
TEST_P(GpuFp8Cast, TransposeOnly) {
  const auto [t, f, s] = GetParam();
  Rng rng(7);
  CastInput in(s, t, rng);
  const std::size_t n = in.values.size();
  const float scale = cpu::fp8_scale_for(cpu::amax(in.values.data(), n), f);
  DeviceMem dscale(sizeof(float));
  dscale.upload(&scale, sizeof(scale));
  std::vector<std::uint8_t> want(n);
  cpu::quantize_fp8(in.values.data(), n, scale, f, want.data());
  DeviceMem out_t(static_cast<std::size_t>(s.cols * s.rows));
  cuda::fp8_cast_transpose(in.x, dscale.get<float>(), f, cuda::Fp8View{},
                           cuda::Fp8View{out_t.get<std::uint8_t>(), s.rows}, nullptr);
  expect_codes(out_t.download<std::uint8_t>(out_t.bytes()), transpose(want, s.rows, s.cols), s.cols,
               s.rows, s.rows, "transposed copy alone");
}

// Delayed scaling's casts (the amax argument): the same codes, and the
// amax raised to the tensor's -- from below, and kept from above -- by
// both cast kernels and both cast_transpose variants.
TEST_P(GpuFp8Cast, CastsRecordTheAmaxForDelayedScaling) {
  const auto [t, f, s] = GetParam();
  Rng rng(8);
  CastInput in(s, t, rng);
  const std::size_t n = in.values.size();
  const auto tensor_amax = static_cast<float>(cpu::amax(in.values.data(), n));
  const float scale = cpu::fp8_scale_for(tensor_amax, f, -1);  // some elements saturate
  std::vector<std::uint8_t> want(n);
  cpu::quantize_fp8(in.values.data(), n, scale, f, want.data());
  const std::int64_t ld = s.cols + s.pad, ld_t = s.rows + s.pad;
  for (const float earlier : {tensor_amax / 3, tensor_amax * 2}) {
    SCOPED_TRACE("amax before the cast " + std::to_string(earlier));
    for (const bool transposing : {false, true}) {
      // [scale, amax] on the device.
      DeviceMem scalars(2 * sizeof(float));
      const float init[2] = {scale, earlier};
      scalars.upload(init, sizeof(init));
      DeviceMem out(static_cast<std::size_t>(s.rows * ld)),
          out_t(static_cast<std::size_t>(s.cols * ld_t));
      float* amax = scalars.get<float>() + 1;
      if (transposing) {
        cuda::fp8_cast_transpose(in.x, scalars.get<float>(), f,
                                 cuda::Fp8View{out.get<std::uint8_t>(), ld},
                                 cuda::Fp8View{out_t.get<std::uint8_t>(), ld_t}, nullptr, amax);
        expect_codes(out_t.download<std::uint8_t>(out_t.bytes()), transpose(want, s.rows, s.cols),
                     s.cols, s.rows, ld_t, "transposed copy");
      } else {
        cuda::fp8_cast(in.x, scalars.get<float>(), f, cuda::Fp8View{out.get<std::uint8_t>(), ld},
                       nullptr, amax);
      }
      expect_codes(out.download<std::uint8_t>(out.bytes()), want, s.rows, s.cols, ld,
                   transposing ? "fp8_cast_transpose" : "fp8_cast");
      EXPECT_EQ(scalars.download<float>(2)[1], std::max(earlier, tensor_amax))
          << (transposing ? "fp8_cast_transpose" : "fp8_cast");
    }
  }
}

// An fp32 master weight read as its bf16 values (Fp8Source::Bf16OfF32, the
// weights whose bf16 copy the plan does not keep): the amax and codes of
// that bf16 copy, from the amax pass and from every cast variant, with the
// amax recorded as delayed scaling records it.
TEST_P(GpuFp8Cast, AnFp32SourceReadAsBf16GivesItsBf16CopysCodes) {
  const auto [t, f, s] = GetParam();
  if (t != DType::F32) GTEST_SKIP() << "only an fp32 source is read as bf16";
  Rng rng(9);
  CastInput in(s, t, rng);
  const std::size_t n = in.values.size();
  std::vector<float> copy(n);
  for (std::size_t i = 0; i < n; ++i) {
    copy[i] = static_cast<float>(bf16_bits_to_double(round_to_bf16_bits(in.values[i])));
  }
  const cuda::Fp8Source source = cuda::Fp8Source::Bf16OfF32;
  const auto copy_amax = static_cast<float>(cpu::amax(copy.data(), n));
  DeviceMem amax(sizeof(float));
  cuda::fp8_amax(in.x, amax.get<float>(), nullptr, source);
  EXPECT_EQ(amax.download<float>(1)[0], copy_amax) << "amax";

  const float scale = cpu::fp8_scale_for(copy_amax, f, -1);  // some elements saturate
  std::vector<std::uint8_t> want(n), fp32_own(n);
  cpu::quantize_fp8(copy.data(), n, scale, f, want.data());
  cpu::quantize_fp8(in.values.data(), n, scale, f, fp32_own.data());
  if (n >= 4096) EXPECT_NE(want, fp32_own) << "the fp32 values' own codes differ: the test bites";
  const std::int64_t ld = s.cols + s.pad, ld_t = s.rows + s.pad;
  for (const bool transposing : {false, true}) {
    SCOPED_TRACE(transposing ? "fp8_cast_transpose" : "fp8_cast");
    DeviceMem scalars(2 * sizeof(float));  // [scale, amax]
    const float init[2] = {scale, 0.0f};
    scalars.upload(init, sizeof(init));
    DeviceMem out(static_cast<std::size_t>(s.rows * ld)),
        out_t(static_cast<std::size_t>(s.cols * ld_t));
    float* recorded = scalars.get<float>() + 1;
    const cuda::Fp8View direct{out.get<std::uint8_t>(), ld};
    if (transposing) {
      cuda::fp8_cast_transpose(in.x, scalars.get<float>(), f, direct,
                               cuda::Fp8View{out_t.get<std::uint8_t>(), ld_t}, nullptr, recorded,
                               source);
      expect_codes(out_t.download<std::uint8_t>(out_t.bytes()), transpose(want, s.rows, s.cols),
                   s.cols, s.rows, ld_t, "transposed copy");
    } else {
      cuda::fp8_cast(in.x, scalars.get<float>(), f, direct, nullptr, recorded, source);
    }
    expect_codes(out.download<std::uint8_t>(out.bytes()), want, s.rows, s.cols, ld, "codes");
    EXPECT_EQ(scalars.download<float>(2)[1], copy_amax) << "recorded amax";
  }
}

std::string cast_name(const ::testing::TestParamInfo<CastParam>& info) {
  const auto& [t, f, s] = info.param;
  return dtype_label(t) + "_" + format_label(f) + "_" + std::to_string(s.rows) + "x" +
         std::to_string(s.cols) + (s.pad != 0 ? "_padded" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuFp8Cast,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(Fp8Format::E4M3, Fp8Format::E5M2),
                                            ::testing::ValuesIn(kCastShapes)),
                         cast_name);

class GpuFp8Scale : public Fp8GpuTest {};

// The scale of an amax written straight to the device: the cases the
// random tensors do not reach.
TEST_F(GpuFp8Scale, EdgeCasesMatchTheCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float amaxes[] = {0.0f, inf, nan, 1e-38f, FLT_TRUE_MIN, 1.0f, 448.0f, 3.0e38f, 0.1f};
  DeviceMem amax(sizeof(float)), scales(2 * sizeof(float));
  for (const Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    for (const float a : amaxes) {
      for (const int margin : {0, 1, 3}) {
        SCOPED_TRACE(std::string(format_label(f)) + " amax " + std::to_string(a) + " margin " +
                     std::to_string(margin));
        amax.upload(&a, sizeof(a));
        cuda::fp8_scale_from_amax(amax.get<float>(), f, margin, scales.get<float>(),
                                  scales.get<float>() + 1, nullptr);
        const auto got = scales.download<float>(2);
        const float want = cpu::fp8_scale_for(a, f, margin);
        EXPECT_EQ(got[0], want);
        EXPECT_EQ(got[1], cpu::fp8_inverse_scale(want));
      }
    }
  }
}

// A NaN anywhere makes the amax NaN (the scale then falls back to 1 and the
// non-finite check sees the NaN); an infinity makes it infinite.
TEST_F(GpuFp8Scale, AmaxPropagatesNanAndInf) {
  for (const DType t : {DType::F32, DType::BF16}) {
    Rng rng(3);
    CastInput in(CastShape{40, 24, 0}, t, rng);
    DeviceMem amax(sizeof(float));
    for (const float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> v = in.values;
      v[517] = bad;
      const auto bytes = host_bytes(v, 40, 24, 24, t);
      in.mem.upload(bytes.data(), bytes.size());
      cuda::fp8_amax(in.x, amax.get<float>(), nullptr);
      const float got = amax.download<float>(1)[0];
      if (std::isnan(bad)) {
        EXPECT_TRUE(std::isnan(got)) << dtype_label(t) << " amax with a NaN: " << got;
      } else {
        EXPECT_EQ(got, bad) << dtype_label(t) << " amax with an inf";
      }
    }
  }
}

// Delayed scaling's step boundary, bit for bit with the CPU's: random
// histories, one whose maximum is the oldest (dropped), one of zeroes, one
// holding a NaN.
TEST_F(GpuFp8Scale, UpdateScalesMatchesTheCpu) {
  Rng rng(9);
  for (const Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    const int count = 300;  // more than one launch block
    std::vector<float> blocks(static_cast<std::size_t>(count) * kFp8Block);
    for (float& x : blocks)
      x = static_cast<float>(std::fabs(rng.normal()) * std::exp(rng.normal() * 8));
    blocks[kFp8Block + kFp8HistoryAt + kFp8History - 1] = 1e30f;
    for (int h = 0; h < kFp8Block; ++h) blocks[2 * kFp8Block + h] = 0.0f;
    blocks[3 * kFp8Block + kFp8HistoryAt + 4] = std::numeric_limits<float>::quiet_NaN();
    DeviceMem dev(blocks.size() * sizeof(float));
    dev.upload(blocks.data(), blocks.size() * sizeof(float));
    cuda::fp8_update_scales(dev.get<float>(), count, f, nullptr);
    cpu::update_fp8_scales(blocks.data(), count, f);
    const std::vector<float> got = dev.download<float>(blocks.size());
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (std::isnan(blocks[i])) {
        ASSERT_TRUE(std::isnan(got[i])) << format_label(f) << " float " << i;
      } else {
        ASSERT_EQ(got[i], blocks[i]) << format_label(f) << " float " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tinyllama::gpu_test
