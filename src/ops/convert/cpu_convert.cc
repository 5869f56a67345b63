// dst = src converted elementwise. The CPU backend computes in float32 or
// float64 only (mixed precision is a GPU feature), so conversion between
// those two is all the reference ever needs.
#include "ops/convert/cpu_convert.h"
#include "cpu/cpu_common.h"

namespace tinyllama::cpu {
namespace {

template <typename To, typename From>
void convert_impl(Mat dst, Mat src) {
  parallel_elements(dst.rows, dst.cols, 1.0,
                    [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
                      for (std::int64_t r = r0; r < r1; ++r) {
                        const From* in = row<From>(src, r);
                        To* out = row<To>(dst, r);
                        for (std::int64_t c = c0; c < c1; ++c) out[c] = static_cast<To>(in[c]);
                      }
                    });
}

}  // namespace

void convert(Mat dst, Mat src) {
  const std::string op = "convert";
  require_shape(dst, src.rows, src.cols, op, "dst");
  require_shape(src, src.rows, src.cols, op, "src");
  dispatch(dst.dtype, op, [&](auto to) {
    dispatch(src.dtype, op,
             [&](auto from) { convert_impl<decltype(to), decltype(from)>(dst, src); });
  });
}

}  // namespace tinyllama::cpu
