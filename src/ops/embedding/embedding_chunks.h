#pragma once
// The sorted embedding gradient (EmbeddingGradImpl::Sorted) cuts the
// sorted positions into chunks, and a run of equal ids that crosses chunks
// leaves partial sums, a row of the table's width in each chunk it touches,
// which a second kernel adds to the row: what both the kernels
// (ops/embedding/cuda_embedding_sorted.cu) and the cost model
// (prof/access_trace.cc) need to know of them.
#include <algorithm>
#include <cstdint>

namespace tinyllama {

// Sorted positions per chunk. 32 keeps a thread's serial work short (32 row
// loads) with the blocks many (1024 chunks at B32 S1024). A small step, up
// to kShortChunksUpTo positions, cuts chunks of 4 or 8 rows (one or two
// rounds of the kernel's row loads), kSpreadChunks of them at most: at the
// workshop's 1024 positions 32-row chunks made 32 chunks, 16 blocks of 128
// threads on a GPU of 132 SMs, each thread adding 32 rows one after another
// (kernel bench: 30.8 us for the gradient, 16.3 with chunks of 4; at 8192
// positions 16-row chunks measured slower than 32, 118.5 against 111.8 us;
// docs/log/2026-11-25.md). Larger batches grow the chunks past 32
// instead, so that the partial sums (two rows of dim floats per chunk) stay
// within kMaxChunks rows each.
inline constexpr std::int64_t kMinChunkRows = 4;
inline constexpr std::int64_t kFullChunkRows = 32;
inline constexpr std::int64_t kSpreadChunks = 512;
inline constexpr std::int64_t kShortChunksUpTo = 4096;
inline constexpr std::int64_t kMaxChunks = 4096;

// The chunking arithmetic, which the kernel file uses for its launches too.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

inline std::int64_t round_up(std::int64_t a, std::int64_t b) {
  return ceil_div(a, b) * b;
}

inline std::int64_t embedding_chunk_rows(std::int64_t positions) {
  if (positions <= kShortChunksUpTo) {
    return std::max(kMinChunkRows, round_up(ceil_div(positions, kSpreadChunks), kMinChunkRows));
  }
  return std::max(kFullChunkRows, round_up(ceil_div(positions, kMaxChunks), kFullChunkRows));
}

// The partial-sum rows a call writes and reads back, in expectation, when
// `positions` ids are drawn uniformly and touch `distinct` rows: a chunk
// boundary falls inside a run where the two sorted ids beside it are equal,
// (positions - distinct) of the (positions - 1) neighbouring pairs; each
// such boundary leaves at most two partial rows (the run's tail in the
// chunk before, a head in the chunk after). An upper bound: a run that
// crosses several boundaries leaves one row fewer than two per boundary.
inline double embedding_partial_rows(std::int64_t positions, double distinct) {
  if (positions < 2) return 0.0;
  const std::int64_t chunk_rows = embedding_chunk_rows(positions);
  const std::int64_t boundaries = ceil_div(positions, chunk_rows) - 1;
  const double equal_neighbours =
      std::max(0.0, static_cast<double>(positions) - distinct) / static_cast<double>(positions - 1);
  return 2.0 * static_cast<double>(boundaries) * equal_neighbours;
}

}  // namespace tinyllama
