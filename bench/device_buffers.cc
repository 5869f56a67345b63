#include "bench/device_buffers.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/errors.h"
#include "core/narrow_float.h"

namespace tinyllama::bench {
namespace {

// Elements encoded and uploaded at a time: bounds the host staging memory
// (16 MB of fp32) while keeping each upload large.
constexpr std::int64_t kChunkElements = std::int64_t{1} << 22;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// core's encode_element, with the fast 16-bit rounding below (the fills
// encode billions of elements at the 1 B config; the results are the same).
void encode(double v, DType t, unsigned char* p) {
  if (t != DType::BF16 && t != DType::F16) {
    encode_element(v, t, p);
    return;
  }
  const auto f = static_cast<float>(v);
  const std::uint16_t h = t == DType::BF16 ? bf16_bits(f) : f16_bits(f);
  std::memcpy(p, &h, 2);
}

unsigned fill_threads() {
  return std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
}

// Runs body(begin, end) over [0, n) split across the fill threads.
template <typename Body>
void parallel_chunks(std::int64_t n, Body&& body) {
  const auto threads = static_cast<std::int64_t>(fill_threads());
  if (threads <= 1 || n < (1 << 16)) {
    body(std::int64_t{0}, n);
    return;
  }
  const std::int64_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::int64_t t = 1; t < threads; ++t) {
    const std::int64_t begin = std::min(n, t * per);
    const std::int64_t end = std::min(n, begin + per);
    if (begin < end) pool.emplace_back([&body, begin, end] { body(begin, end); });
  }
  body(std::int64_t{0}, std::min(n, per));
  for (std::thread& th : pool) th.join();
}

void require_contiguous(const Mat& m, const char* what) {
  if (!m.contiguous()) {
    throw std::invalid_argument(std::string("kernel bench: ") + what +
                                " needs a contiguous buffer (a whole allocation)");
  }
}

}  // namespace

std::uint16_t bf16_bits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return round_to_bf16_bits(f);  // NaN
  // Round to nearest even on the 16 bits dropped; a carry moves into the
  // exponent, as it should (up to infinity).
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

std::uint16_t f16_bits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  // Normal halves, [2^-14, 65520) (65520 and above round to infinity): round
  // to nearest even on the 13 mantissa bits dropped, then move the exponent
  // bias from 127 to 15. Zeros, subnormals, overflow and NaN take the
  // general conversion.
  if (abs >= 0x38800000u && abs < 0x477ff000u) {
    const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
  }
  return round_to_f16_bits(f);
}

double uniform_at(std::uint64_t seed, std::uint64_t i) {
  return static_cast<double>(splitmix64(seed * 0x2545f4914f6cdd1dull + i) >> 11) * 0x1.0p-53;
}

void fill_uniform(Backend& gpu, const Mat& m, std::uint64_t seed, double lo, double hi) {
  require_contiguous(m, "fill_uniform");
  const std::size_t es = dtype_size(m.dtype);
  const std::int64_t n = m.numel();
  std::vector<unsigned char> staging(static_cast<std::size_t>(std::min(n, kChunkElements)) * es);
  for (std::int64_t c0 = 0; c0 < n; c0 += kChunkElements) {
    const std::int64_t count = std::min(kChunkElements, n - c0);
    parallel_chunks(count, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        const double u = uniform_at(seed, static_cast<std::uint64_t>(c0 + i));
        encode(lo + (hi - lo) * u, m.dtype, &staging[static_cast<std::size_t>(i) * es]);
      }
    });
    gpu.upload(static_cast<char*>(m.data) + static_cast<std::size_t>(c0) * es, staging.data(),
               static_cast<std::size_t>(count) * es);
  }
}

void fill_poison(Backend& gpu, const Mat& m) {
  require_contiguous(m, "fill_poison");
  const std::size_t es = dtype_size(m.dtype);
  const std::int64_t n = m.numel();
  const std::vector<unsigned char> nan(static_cast<std::size_t>(std::min(n, kChunkElements)) * es,
                                       0xff);
  for (std::int64_t c0 = 0; c0 < n; c0 += kChunkElements) {
    const std::int64_t count = std::min(kChunkElements, n - c0);
    gpu.upload(static_cast<char*>(m.data) + static_cast<std::size_t>(c0) * es, nan.data(),
               static_cast<std::size_t>(count) * es);
  }
}

DeviceBuffers::~DeviceBuffers() {
  for (void* p : owned_) {
    try {
      gpu_.release(p);
    } catch (...) {
      // A failed release (a device error already reported) must not hide it.
    }
  }
}

void* DeviceBuffers::allocate(std::size_t bytes) {
  void* p = gpu_.allocate(std::max<std::size_t>(bytes, 1));
  owned_.push_back(p);
  return p;
}

Mat DeviceBuffers::alloc(std::int64_t rows, std::int64_t cols, DType dtype) {
  if (rows < 0 || cols < 0) throw std::invalid_argument("kernel bench: negative buffer shape");
  return Mat(allocate(static_cast<std::size_t>(rows * cols) * dtype_size(dtype)), dtype, rows,
             cols);
}

Mat DeviceBuffers::random(std::int64_t rows, std::int64_t cols, DType dtype, double lo, double hi) {
  const Mat m = alloc(rows, cols, dtype);
  fill_uniform(gpu_, m, splitmix64(seed_ + ++streams_), lo, hi);
  return m;
}

Mat DeviceBuffers::poisoned(std::int64_t rows, std::int64_t cols, DType dtype) {
  const Mat m = alloc(rows, cols, dtype);
  fill_poison(gpu_, m);
  return m;
}

const std::int32_t* DeviceBuffers::tokens(std::int64_t count, int limit,
                                          std::vector<std::int32_t>& host, Mix mix) {
  const std::uint64_t seed = splitmix64(seed_ + ++streams_);
  // Zipf: the inverse of the cumulative distribution, by binary search.
  std::vector<double> cdf;
  if (mix == Mix::Zipf) {
    cdf.resize(static_cast<std::size_t>(limit));
    double sum = 0.0;
    for (int id = 0; id < limit; ++id) cdf[static_cast<std::size_t>(id)] = sum += 1.0 / (id + 1.0);
  }
  host.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const double u = uniform_at(seed, static_cast<std::uint64_t>(i));
    std::int64_t id = 0;
    if (mix == Mix::Zipf) {
      id = std::lower_bound(cdf.begin(), cdf.end(), u * cdf.back()) - cdf.begin();
    } else {
      id = static_cast<std::int64_t>(u * static_cast<double>(limit));
    }
    host[static_cast<std::size_t>(i)] =
        static_cast<std::int32_t>(std::min<std::int64_t>(id, limit - 1));
  }
  void* p = allocate(static_cast<std::size_t>(count) * sizeof(std::int32_t));
  if (count > 0) gpu_.upload(p, host.data(), host.size() * sizeof(std::int32_t));
  return static_cast<const std::int32_t*>(p);
}

}  // namespace tinyllama::bench
