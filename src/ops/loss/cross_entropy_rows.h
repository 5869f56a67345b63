#pragma once
// Which rows the fused cross-entropy (cuda_cross_entropy_fused.cu) copies
// into shared memory and so reads from DRAM once instead of twice. A plain
// header of the op's contract, no kernel: its cost (loss_cost.cc) counts
// the bytes the same way in every build.
#include <cstdint>

namespace tinyllama::cuda {

// The kernel bench on the H100 (docs/log/2026-11-27.md, seventh
// session): staged rows cost as much as streamed ones at 24 KiB (171 against
// 174 µs), 9 % more at 16 KiB, and save 15-35 % from 32 KiB up, where the
// rows resident at once no longer fit in L2 for the streamed kernel's second
// read.
inline constexpr std::int64_t kCrossEntropyStagedMinRowBytes = 24 * 1024;

// The largest row a Hopper block can stage: 227 KiB of opt-in shared memory
// less the block reductions' 256 bytes. The kernel asks the device it runs
// on; the cost model assumes Hopper.
inline constexpr std::int64_t kCrossEntropyStagedMaxRowBytesHopper = 227 * 1024 - 256;

// Whether a row (padded to 16 bytes) fits a Hopper block's shared memory.
constexpr bool cross_entropy_row_fits_on_hopper(std::int64_t row_bytes) {
  return (row_bytes + 15) / 16 * 16 <= kCrossEntropyStagedMaxRowBytesHopper;
}

constexpr bool cross_entropy_row_staged_on_hopper(std::int64_t row_bytes) {
  return row_bytes >= kCrossEntropyStagedMinRowBytes && cross_entropy_row_fits_on_hopper(row_bytes);
}

}  // namespace tinyllama::cuda
