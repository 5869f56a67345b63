#pragma once
// Shared by the GPU tests: fixtures that skip (loudly) without a device, and
// a harness that keeps every tensor twice: on the host in float64 for the CPU
// reference ops (src/ops/*/cpu_*.h) and on the device in the dtype under test
// for the CUDA backend. Each test runs one op on both and compares.
//
// Inputs are drawn at random (never all zeros), rounded to the device dtype
// on the host and given to both sides with identical values, so a comparison
// measures the kernel and not the input rounding. Device outputs and the
// padding beyond each row are poisoned with 0xff bytes (NaN in every float
// dtype) first: an element the kernel forgets, or a write past a row, shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/mat.h"
#include "core/narrow_float.h"
#include "core/rng.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_entry.h"
#include "io/hf_weights.h"
#include "model/test_plans.h"

namespace tinyllama {

// Readable test parameters in gtest's output (found by argument-dependent lookup).
inline void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}

}  // namespace tinyllama

namespace tinyllama::gpu_test {

inline constexpr const char* kSkipMessage =
    "no CUDA device available: GPU test SKIPPED (run on a machine with a GPU)";

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << kSkipMessage;
  }
};

template <typename Param>
class GpuParamTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << kSkipMessage;
  }
};

// Max error a device result may have against the float64 reference, relative
// to the largest reference magnitude, per the dtype it is computed in.
inline double tolerance(DType t) {
  return t == DType::F32 ? 1e-5 : 2e-2;
}

inline bool low_precision(DType t) {
  return t == DType::BF16 || t == DType::F16;
}

inline Precision precision_for(DType t) {
  return low_precision(t) ? Precision::amp(t) : Precision::fp32();
}

// "F32", "BF16", ...: test names and messages use the safetensors names.
inline std::string dtype_label(DType t) {
  return hf_dtype(t);
}

inline const std::vector<DType>& gpu_dtypes() {
  static const std::vector<DType> all{DType::F32, DType::BF16, DType::F16};
  return all;
}

// ---- host encoding of the device dtypes --------------------------------------
// The bit-exact conversions are the safetensors code's (io/hf_weights.h).
// Values go through float first, as the device's own fp32 -> 16-bit casts do.

// v as dtype t would store it.
inline double round_to(double v, DType t) {
  unsigned char buf[8];
  encode_element(v, t, buf);
  return decode_element(buf, t);
}

// ---- twin tensors --------------------------------------------------------------

// One tensor on both sides: cpu is float64 in host memory, gpu is the dtype
// under test in device memory; both views share rows, cols and ld. A view
// that owns its allocation also owns the padding after each row, which must
// stay poisoned; a column block of a larger buffer does not.
struct Twin {
  Mat cpu;
  Mat gpu;
  bool owns_padding = true;
};

// Column block [c0, c0+n) of both sides (q/k/v slices of a qkv buffer).
inline Twin col_block(const Twin& t, std::int64_t c0, std::int64_t n) {
  return Twin{t.cpu.col_block(c0, n), t.gpu.col_block(c0, n), false};
}

struct Tokens {
  const std::int32_t* cpu = nullptr;  // host
  const std::int32_t* gpu = nullptr;  // device
};

class Harness {
 public:
  explicit Harness(Precision precision, std::uint64_t seed = 20261122)
      : gpu_(std::make_unique<cuda::CudaBackend>(precision)), precision_(precision), rng_(seed) {}
  explicit Harness(DType compute, std::uint64_t seed = 20261122)
      : Harness(precision_for(compute), seed) {}

  ~Harness() {
    try {
      gpu_->synchronize();
    } catch (...) {
    }
    for (void* p : gpu_buffers_) {
      try {
        gpu_->release(p);
      } catch (...) {
      }
    }
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  cuda::CudaBackend& gpu() { return *gpu_; }
  Rng& rng() { return rng_; }

  // Prepares the backend with the plan of `level` (e.g. "v1": materialised
  // attention's scratch; "v2": flash attention's) at these shapes, with the
  // kernel families `pins` asks for.
  void prepare(const ModelConfig& cfg, BatchShape shape, const std::string& level,
               const KernelPins& pins = {}) {
    gpu_->prepare(cfg, shape, test_plan(level, precision_, *gpu_, cfg, shape, pins));
  }

  // Random N(mean, scale^2) values rounded to dtype; `pad` extra elements per row.
  Twin input(std::int64_t rows, std::int64_t cols, DType dtype, double scale = 1.0,
             std::int64_t pad = 0, double mean = 0.0) {
    std::vector<double> values(static_cast<std::size_t>(rows * cols));
    for (double& v : values) v = mean + scale * rng_.normal();
    return from_values(rows, cols, dtype, values, pad);
  }

  // The given values (row-major, rows*cols of them) rounded to dtype; the
  // padding is NaN on both sides, so reading it poisons a result.
  Twin from_values(std::int64_t rows, std::int64_t cols, DType dtype,
                   const std::vector<double>& values, std::int64_t pad = 0) {
    EXPECT_EQ(static_cast<std::int64_t>(values.size()), rows * cols);
    const std::int64_t ld = cols + pad;
    Twin t{host_tensor(rows, cols, ld), device_tensor(rows, cols, ld, dtype), true};
    const std::size_t es = dtype_size(dtype);
    std::vector<unsigned char> bytes(static_cast<std::size_t>(rows * ld) * es, 0xff);
    double* host = t.cpu.ptr<double>();
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::size_t i = static_cast<std::size_t>(r * ld + c);
        encode_element(values[static_cast<std::size_t>(r * cols + c)], dtype, &bytes[i * es]);
        host[i] = decode_element(&bytes[i * es], dtype);
      }
    }
    gpu_->upload(t.gpu.data, bytes.data(), bytes.size());
    return t;
  }

  // An output: zeros on the host, 0xff bytes (NaN) on the device, padding too.
  Twin output(std::int64_t rows, std::int64_t cols, DType dtype, std::int64_t pad = 0) {
    const std::int64_t ld = cols + pad;
    Twin t{host_tensor(rows, cols, ld), device_tensor(rows, cols, ld, dtype), true};
    poison(t.gpu);
    return t;
  }

  // Copies of a tensor's current host values into a new twin of dtype (used to
  // give the device the reference's saved forward results).
  Twin copy_of(const Mat& cpu, DType dtype, std::int64_t pad = 0) {
    return from_values(cpu.rows, cpu.cols, dtype, host_values(cpu), pad);
  }

  void poison(const Mat& gpu) {
    std::vector<unsigned char> nan(
        static_cast<std::size_t>(std::max<std::int64_t>(gpu.rows * gpu.ld, 1)) *
            dtype_size(gpu.dtype),
        0xff);
    gpu_->upload(gpu.data, nan.data(), nan.size());
  }

  Tokens tokens(const std::vector<std::int32_t>& ids) {
    token_store_.push_back(ids);
    const std::size_t bytes = std::max<std::size_t>(ids.size(), 1) * sizeof(std::int32_t);
    void* g = gpu_->allocate(bytes);
    gpu_buffers_.push_back(g);
    if (!ids.empty()) gpu_->upload(g, ids.data(), ids.size() * sizeof(std::int32_t));
    return {token_store_.back().data(), static_cast<const std::int32_t*>(g)};
  }

  std::vector<std::int32_t> random_ids(std::int64_t n, int limit) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
    for (auto& id : ids)
      id = static_cast<std::int32_t>(rng_.below(static_cast<std::uint64_t>(limit)));
    return ids;
  }

  // A view's elements, row-major, as doubles.
  static std::vector<double> host_values(const Mat& m) {
    std::vector<double> out(static_cast<std::size_t>(m.numel()));
    for (std::int64_t r = 0; r < m.rows; ++r) {
      for (std::int64_t c = 0; c < m.cols; ++c) {
        out[static_cast<std::size_t>(r * m.cols + c)] = m.ptr<double>()[r * m.ld + c];
      }
    }
    return out;
  }

  std::vector<double> device_values(const Mat& m) {
    const std::vector<unsigned char> raw = device_bytes(m);
    std::vector<double> out(static_cast<std::size_t>(m.numel()));
    const std::size_t es = dtype_size(m.dtype);
    for (std::int64_t r = 0; r < m.rows; ++r) {
      for (std::int64_t c = 0; c < m.cols; ++c) {
        out[static_cast<std::size_t>(r * m.cols + c)] =
            decode_element(&raw[static_cast<std::size_t>(r * m.ld + c) * es], m.dtype);
      }
    }
    return out;
  }

  // max |gpu - cpu| / max |cpu| over the view; infinity if either side is not
  // finite (an unwritten element) or an owned row padding was written.
  double rel_err(const Twin& t) {
    if (t.owns_padding && !padding_intact(t.gpu)) return INFINITY;
    const std::vector<double> g = device_values(t.gpu);
    const std::vector<double> c = host_values(t.cpu);
    double diff = 0.0;
    double ref = 0.0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (!std::isfinite(g[i]) || !std::isfinite(c[i])) return INFINITY;
      diff = std::max(diff, std::abs(g[i] - c[i]));
      ref = std::max(ref, std::abs(c[i]));
    }
    return ref > 0.0 ? diff / ref : diff;
  }

  // Describes the first few mismatches, for a failure message.
  std::string mismatches(const Twin& t, double tol, int limit = 5) {
    std::ostringstream os;
    if (t.owns_padding && !padding_intact(t.gpu)) os << "row padding was overwritten; ";
    const std::vector<double> g = device_values(t.gpu);
    const std::vector<double> c = host_values(t.cpu);
    double ref = 0.0;
    for (double v : c) ref = std::max(ref, std::abs(v));
    const double scale = ref > 0 ? ref : 1.0;
    int shown = 0;
    for (std::size_t i = 0; i < g.size() && shown < limit; ++i) {
      if (!(std::abs(g[i] - c[i]) <= tol * scale)) {
        const auto r = static_cast<std::int64_t>(i) / t.cpu.cols;
        os << "[" << r << "," << static_cast<std::int64_t>(i) - r * t.cpu.cols << "] gpu " << g[i]
           << " cpu " << c[i] << "; ";
        ++shown;
      }
    }
    os << "max |cpu| " << ref;
    return os.str();
  }

  void expect_close(const Twin& t, double tol, const std::string& what) {
    const double err = rel_err(t);
    EXPECT_LE(err, tol) << what << " [" << t.cpu.rows << " x " << t.cpu.cols << ", "
                        << dtype_label(t.gpu.dtype) << "]: relative error " << err << " > " << tol
                        << ": " << mismatches(t, tol);
  }

  // The padding after each row (ld > cols) still holds the poison bytes.
  bool padding_intact(const Mat& m) {
    if (m.ld == m.cols || m.rows == 0) return true;
    const std::size_t es = dtype_size(m.dtype);
    std::vector<unsigned char> raw(static_cast<std::size_t>(m.rows * m.ld) * es);
    gpu_->download(raw.data(), m.data, raw.size());
    for (std::int64_t r = 0; r < m.rows; ++r) {
      for (std::size_t b = static_cast<std::size_t>(r * m.ld + m.cols) * es;
           b < static_cast<std::size_t>((r + 1) * m.ld) * es; ++b) {
        if (raw[b] != 0xff) return false;
      }
    }
    return true;
  }

 private:
  std::vector<unsigned char> device_bytes(const Mat& m) {
    std::vector<unsigned char> raw(static_cast<std::size_t>(m.rows * m.ld) * dtype_size(m.dtype));
    if (m.rows == 0) return raw;
    // A column block starts inside its row; it ends cols elements into the last one.
    const std::size_t bytes =
        static_cast<std::size_t>((m.rows - 1) * m.ld + m.cols) * dtype_size(m.dtype);
    gpu_->download(raw.data(), m.data, bytes);
    return raw;
  }

  Mat host_tensor(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    host_store_.emplace_back(static_cast<std::size_t>(std::max<std::int64_t>(rows * ld, 1)), 0.0);
    return Mat(host_store_.back().data(), DType::F64, rows, cols, ld);
  }

  Mat device_tensor(std::int64_t rows, std::int64_t cols, std::int64_t ld, DType t) {
    void* p = gpu_->allocate(static_cast<std::size_t>(std::max<std::int64_t>(rows * ld, 1)) *
                             dtype_size(t));
    gpu_buffers_.push_back(p);
    return Mat(p, t, rows, cols, ld);
  }

  std::unique_ptr<cuda::CudaBackend> gpu_;
  Precision precision_;
  Rng rng_;
  std::vector<void*> gpu_buffers_;
  std::deque<std::vector<double>> host_store_;  // deque: element addresses stay put
  std::deque<std::vector<std::int32_t>> token_store_;
};

}  // namespace tinyllama::gpu_test
