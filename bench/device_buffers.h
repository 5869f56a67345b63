#pragma once
// Device memory of one op case: every buffer is allocated through the
// Backend when the case is made and released with it, so the bench holds
// one op's buffers at a time (the 1 B config's logits alone are 0.5-1 GB).
//
// Inputs are filled with seeded uniform values (never zeros: a kernel that
// ignores an input must not pass its check). Each value is a function of
// the seed and the element's index only, so the fill is the same whatever
// the thread count. Outputs are "poisoned" with 0xff bytes, a NaN in every
// float dtype, so an element the op forgets to write fails the check.
#include <cstdint>
#include <vector>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::bench {

class DeviceBuffers {
 public:
  DeviceBuffers(Backend& gpu, std::uint64_t seed) : gpu_(gpu), seed_(seed) {}
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  // A contiguous [rows, cols] buffer, contents undefined.
  Mat alloc(std::int64_t rows, std::int64_t cols, DType dtype);
  // Uniform in [lo, hi), rounded to dtype; each call draws a stream of its own.
  Mat random(std::int64_t rows, std::int64_t cols, DType dtype, double lo, double hi);
  // 0xff bytes everywhere (NaN).
  Mat poisoned(std::int64_t rows, std::int64_t cols, DType dtype);
  // `count` token ids in [0, limit), in device memory; `host` gets a copy.
  // Uniform, or Zipf's law with s = 1 (P(id) proportional to 1 / (id + 1)):
  // a skewed distribution like real text's, where id 0 takes 1 / H(limit) of
  // the positions (13 % at vocab 1000; a space is 15-20 % of English bytes).
  enum class Mix { Uniform, Zipf };
  const std::int32_t* tokens(std::int64_t count, int limit, std::vector<std::int32_t>& host,
                             Mix mix = Mix::Uniform);

  Backend& gpu() { return gpu_; }

 private:
  void* allocate(std::size_t bytes);

  Backend& gpu_;
  std::uint64_t seed_;
  std::uint64_t streams_ = 0;  // fills drawn so far
  std::vector<void*> owned_;
};

// Fills a contiguous device matrix as DeviceBuffers::random does.
void fill_uniform(Backend& gpu, const Mat& m, std::uint64_t seed, double lo, double hi);
// Fills a contiguous device matrix with 0xff bytes.
void fill_poison(Backend& gpu, const Mat& m);
// float -> bf16 / fp16 bits, rounded to nearest even: io/hf_weights.h's
// conversions, with a fast path for the common cases (the fills encode
// billions of elements at the 1 B config).
std::uint16_t bf16_bits(float f);
std::uint16_t f16_bits(float f);
// Element i of the uniform stream `seed`, in [0, 1).
double uniform_at(std::uint64_t seed, std::uint64_t i);

}  // namespace tinyllama::bench
