// The FP8 linear ops on the CPU (cpu_fp8_linear.h): quantise through
// cpu_fp8's scale and codec, multiply with its TN reference GEMM.
#include "ops/linear/cpu_fp8_linear.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/narrow_float.h"
#include "cpu/cpu_common.h"
#include "ops/linear/cpu_fp8.h"

namespace tinyllama::cpu {
namespace {

// x's elements as fp32, row-major without padding.
std::vector<float> packed_f32(const Mat& x, const std::string& op) {
  std::vector<float> out(static_cast<std::size_t>(x.rows * x.cols));
  dispatch(x.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.ptr<const T>();
    for (std::int64_t r = 0; r < x.rows; ++r) {
      for (std::int64_t c = 0; c < x.cols; ++c) {
        out[static_cast<std::size_t>(r * x.cols + c)] = static_cast<float>(p[r * x.ld + c]);
      }
    }
  });
  return out;
}

// The K-contiguous copy a GEMM operand is read from: `transposed` picks
// codes_t. Its rows and its K.
struct Operand {
  const std::uint8_t* codes;
  std::int64_t ld, rows, k;
};

Operand operand_of(const Fp8Tensor& t, bool transposed, const char* name, const std::string& op) {
  const std::uint8_t* codes = transposed ? t.codes_t : t.codes;
  require(codes != nullptr, op,
          std::string(name) + " has no " + (transposed ? "transposed" : "row-major") + " copy");
  require(t.scalars != nullptr, op, std::string(name) + " has no scalars");
  return transposed ? Operand{codes, t.ld_t, t.cols, t.rows} : Operand{codes, t.ld, t.rows, t.cols};
}

// The larger of two amaxes, NaN when either is: the order of their bit
// patterns, as the device's atomicMax keeps it (a NaN's bits, sign
// cleared, are above +inf's).
float amax_max(float a, float b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a > b ? a : b;
}

}  // namespace

void update_fp8_scales(float* blocks, int count, Fp8Format f) {
  for (int i = 0; i < count; ++i) {
    float* b = blocks + static_cast<std::ptrdiff_t>(i) * kFp8Block;
    float* history = b + kFp8HistoryAt;
    std::copy_backward(history, history + kFp8History - 1, history + kFp8History);
    history[0] = b[kFp8Amax];
    float most = 0;
    for (int h = 0; h < kFp8History; ++h) most = amax_max(most, history[h]);
    b[kFp8Scale] = fp8_scale_for(most, f);
    b[kFp8Inverse] = fp8_inverse_scale(b[kFp8Scale]);
    b[kFp8Amax] = 0;
  }
}

void quantize_fp8_tensor(const Mat& x, const Fp8Tensor& q, Fp8ScaleFrom from) {
  const std::string op = "quantize_fp8";
  require(q.rows == x.rows && q.cols == x.cols, op,
          "the FP8 tensor's shape differs from x's " + shape_of(x));
  require(q.scalars != nullptr, op, "no scalars");
  require(q.codes == nullptr || q.ld >= x.cols, op, "codes' row stride is below x's width");
  require(q.codes_t == nullptr || q.ld_t >= x.rows, op, "codes_t's row stride is below x's height");
  std::vector<float> v = packed_f32(x, op);
  if (q.rounds_to_bf16) {
    require(x.dtype == DType::F32, op, "rounds_to_bf16 needs an fp32 source, got " + shape_of(x));
    for (float& e : v) e = static_cast<float>(bf16_bits_to_double(round_to_bf16_bits(e)));
  }
  if (from == Fp8ScaleFrom::Amax) {
    const double a = amax(v.data(), v.size());
    q.scalars[kFp8Amax] = static_cast<float>(a);
    q.scalars[kFp8Scale] = fp8_scale_for(a, q.format);
    q.scalars[kFp8Inverse] = fp8_inverse_scale(q.scalars[kFp8Scale]);
  } else if (from == Fp8ScaleFrom::History) {
    q.scalars[kFp8Amax] =
        amax_max(q.scalars[kFp8Amax], static_cast<float>(amax(v.data(), v.size())));
  }
  std::vector<std::uint8_t> codes(v.size());
  quantize_fp8(v.data(), v.size(), q.scalars[kFp8Scale], q.format, codes.data());
  for (std::int64_t r = 0; r < x.rows; ++r) {
    for (std::int64_t c = 0; c < x.cols; ++c) {
      const std::uint8_t code = codes[static_cast<std::size_t>(r * x.cols + c)];
      if (q.codes != nullptr) q.codes[r * q.ld + c] = code;
      if (q.codes_t != nullptr) q.codes_t[c * q.ld_t + r] = code;
    }
  }
}

void gemm_fp8_tensor(const Mat& c, const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b,
                     bool trans_b, bool accumulate) {
  const std::string op = "gemm_fp8";
  // op(a) = a reads a's row-major copy; op(b) = b^T reads b's (cuda_gemm_fp8.h).
  const Operand oa = operand_of(a, trans_a, "a", op);
  const Operand ob = operand_of(b, !trans_b, "b", op);
  require(oa.k == ob.k, op,
          "inner dimensions differ: " + std::to_string(oa.k) + " and " + std::to_string(ob.k));
  require_shape(c, oa.rows, ob.rows, op, "c");
  std::vector<float> product(static_cast<std::size_t>(c.rows * c.cols));
  gemm_fp8_reference(oa.rows, ob.rows, oa.k,
                     Fp8Matrix{oa.codes, oa.ld, a.format, a.scalars[kFp8Scale]},
                     Fp8Matrix{ob.codes, ob.ld, b.format, b.scalars[kFp8Scale]}, product.data(),
                     c.cols, /*round_to_bf16=*/false);
  dispatch(c.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    T* p = c.ptr<T>();
    for (std::int64_t r = 0; r < c.rows; ++r) {
      for (std::int64_t j = 0; j < c.cols; ++j) {
        const auto v = static_cast<T>(product[static_cast<std::size_t>(r * c.cols + j)]);
        p[r * c.ld + j] = accumulate ? p[r * c.ld + j] + v : v;
      }
    }
  });
}

}  // namespace tinyllama::cpu
