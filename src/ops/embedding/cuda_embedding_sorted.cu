// The embedding gradient through a sort (EmbeddingGradImpl::Sorted).
//
// Byte-level text sends a sixth of all positions to one table row (the
// space) and most of the rest to a few dozen more. The scan kernel gives each
// token's rows to one block, so a step waits on the block of the commonest
// token. Here the work is cut by position, not by token: the positions are
// sorted by token id (cub's radix sort, which is stable, so equal ids keep
// position order), the sorted list is cut into chunks of equal length, and
// each chunk sums its rows per run of equal ids.
//
// A run that lies within one chunk (nearly every run of a uniform
// distribution) adds its rows to the table row there, starting from the
// row's value, in position order: the CPU reference's order. A run that
// crosses chunks leaves a partial sum per chunk (the chunk's first run in
// `head`, its last in `tail`), and a second kernel adds them to the row,
// chunk by chunk in a fixed tree. No atomics: every sum and its order depend
// on the tokens alone, so the gradient is bitwise repeatable.
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_vec.cuh"
#include "ops/embedding/cuda_embedding.h"
#include "ops/embedding/embedding_chunks.h"

namespace tinyllama::cuda {
namespace {

using Key = std::uint32_t;
// Neither a token id nor the sentinel (ids are int32): "no such position".
constexpr Key kNoKey = 0xffffffffu;

constexpr int kRowsInFlight = 4;  // row loads a thread issues before adding them
constexpr int kChunkThreads = 128;
// The combine kernel: one warp over 32 column vectors, 8 groups over the
// chunks of a run, so that the longest run (a sixth of B32 S1024's 32768
// positions in text: ~170 chunks) is ~21 loads per thread, not 170.
constexpr int kCombineLanes = 32;
constexpr int kCombineGroups = 8;
constexpr int kCombineThreads = kCombineLanes * kCombineGroups;
constexpr int kCombineVec = 4;  // the combine kernel reads float32 only: 16-byte vectors
constexpr std::size_t kAlign = 256;

// The most chunks a call of up to `positions` rows cuts. Not chunks of
// `positions` itself: 4097 * 32 rows make 2049 chunks of 64, 4096 * 32
// rows 4096 chunks of 32; 2048 rows make 512 chunks of 4, 2049 rows 257 of 8.
// Short chunks make at most min(n / 4, kSpreadChunks), 32-row ones at most
// n / 32, and no call more than kMaxChunks.
std::int64_t max_chunks_for(std::int64_t positions) {
  return std::min(std::max(std::min(ceil_div(positions, kMinChunkRows), kSpreadChunks),
                           ceil_div(positions, kFullChunkRows)),
                  kMaxChunks);
}

// Bits of the sort key: ids 0..vocab-1 and the sentinel `vocab`, which a
// position whose token is out of range gets (it sorts last and adds nothing).
int key_bits(std::int64_t vocab) {
  int bits = 1;
  while ((std::int64_t{1} << bits) <= vocab) ++bits;
  return bits;
}

// Floats per partial-sum row: a multiple of 8, so that every thread's
// vector of a row is aligned.
std::int64_t partial_pitch(std::int64_t dim) {
  return round_up(std::max<std::int64_t>(dim, 1), 8);
}

std::size_t aligned(std::int64_t bytes) {
  return static_cast<std::size_t>(round_up(bytes, static_cast<std::int64_t>(kAlign)));
}

// cub's temporary storage for sorting n (key, position) pairs on `bits`
// bits. Asks the device (cub picks its kernels by architecture), launches
// nothing.
std::size_t sort_temp_bytes(std::int64_t n, int bits) {
  std::size_t bytes = 0;
  const cudaError_t err = cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const Key*>(nullptr), static_cast<Key*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr),
      static_cast<int>(n), 0, bits);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeFailure(std::string("embedding gradient: cannot size the sort's scratch: ") +
                         cudaGetErrorString(err));
  }
  return bytes;
}

// Byte offsets of the scratch's parts in its block.
struct Layout {
  std::size_t keys_in = 0, keys_out = 0, pos_in = 0, pos_out = 0;
  std::size_t head = 0, tail = 0, temp = 0, total = 0;
};

Layout layout_for(std::int64_t positions, std::int64_t dim, std::int64_t sort_bytes) {
  const std::size_t ids = aligned(positions * static_cast<std::int64_t>(sizeof(Key)));
  const std::size_t partials = aligned(max_chunks_for(positions) * partial_pitch(dim) *
                                       static_cast<std::int64_t>(sizeof(float)));
  Layout l;
  std::size_t at = 0;
  auto take = [&at](std::size_t bytes) {
    const std::size_t start = at;
    at += bytes;
    return start;
  };
  l.keys_in = take(ids);
  l.keys_out = take(ids);
  l.pos_in = take(ids);
  l.pos_out = take(ids);
  l.head = take(partials);
  l.tail = take(partials);
  l.temp = take(aligned(sort_bytes));
  l.total = at;
  return l;
}

__global__ void sort_input_kernel(Key* __restrict__ keys, std::int32_t* __restrict__ pos,
                                  const std::int32_t* __restrict__ tokens, std::int64_t vocab,
                                  std::int64_t n) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int32_t t = tokens[i];
    keys[i] = (t >= 0 && t < vocab) ? static_cast<Key>(t) : static_cast<Key>(vocab);
    pos[i] = static_cast<std::int32_t>(i);
  }
}

// One thread: one chunk of the sorted positions, Vec columns of its rows.
// Block: x over column vectors, y over chunks, so that narrow rows still
// fill a block.
template <typename T, int Vec>
__global__ void __launch_bounds__(kChunkThreads)
    chunk_sums_kernel(float* __restrict__ dtable, std::int64_t ld_table, const T* __restrict__ dout,
                      std::int64_t ld_out, const Key* __restrict__ keys,
                      const std::int32_t* __restrict__ pos, float* __restrict__ head,
                      float* __restrict__ tail, std::int64_t pitch, Key sentinel, std::int64_t n,
                      std::int64_t dim, std::int64_t chunk_rows, std::int64_t chunks) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t chunk = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const std::int64_t c = (static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * Vec;
  if (chunk >= chunks || c >= dim) return;
  const std::int64_t begin = chunk * chunk_rows;
  const std::int64_t end = min(begin + chunk_rows, n);
  const Key before = begin > 0 ? keys[begin - 1] : kNoKey;
  const Key after = end < n ? keys[end] : kNoKey;
  const Key last = keys[end - 1];

  // Where a run's sum goes: this chunk's partial when the run came from the
  // previous chunk (head) or goes on into the next (tail), else the row.
  auto partial = [&](Key k, bool first_run) -> float* {
    if (first_run && k == before) return head + chunk * pitch + c;
    if (k == last && k == after) return tail + chunk * pitch + c;
    return nullptr;
  };
  auto row = [&](Key k) { return dtable + static_cast<std::int64_t>(k) * ld_table + c; };
  float acc[Vec];
  auto open = [&](Key k, bool first_run) {
    if (k != sentinel && partial(k, first_run) == nullptr) {
      load_f32<Vec>(row(k), acc);
    } else {
#pragma unroll
      for (int i = 0; i < Vec; ++i) acc[i] = 0.f;
    }
  };
  auto close = [&](Key k, bool first_run) {
    if (k == sentinel) return;
    float* p = partial(k, first_run);
    store_f32<Vec>(p != nullptr ? p : row(k), acc);
  };

  Key key = keys[begin];
  bool first_run = true;
  open(key, true);
  for (std::int64_t r0 = begin; r0 < end; r0 += kRowsInFlight) {
    float v[kRowsInFlight][Vec];
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u) {
      if (r0 + u < end)
        load_f32<Vec>(dout + static_cast<std::int64_t>(pos[r0 + u]) * ld_out + c, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u) {
      if (r0 + u >= end) break;
      const Key k = keys[r0 + u];
      if (k != key) {
        close(key, first_run);
        key = k;
        first_run = false;
        open(key, false);
      }
#pragma unroll
      for (int i = 0; i < Vec; ++i) acc[i] += v[u][i];
    }
  }
  close(key, first_run);
}

// One block per chunk; the block of the chunk where a run crossing chunks
// starts adds that run's partials (its tail, then the head of every later
// chunk the run reaches) to the row. Threads: x over column vectors, y over
// groups that each add every blockDim.y-th head in order; the groups are
// then added in order, so the tree is fixed by the shapes.
template <int Vec>
__global__ void __launch_bounds__(kCombineThreads)
    combine_runs_kernel(float* __restrict__ dtable, std::int64_t ld_table,
                        const Key* __restrict__ keys, const float* __restrict__ head,
                        const float* __restrict__ tail, std::int64_t pitch, Key sentinel,
                        std::int64_t dim, std::int64_t chunk_rows, std::int64_t chunks) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  __shared__ int stop_at;
  __shared__ float groups[kCombineThreads * kCombineVec];
  const std::int64_t chunk = blockIdx.x;
  if (chunk + 1 >= chunks) return;
  const std::int64_t begin = chunk * chunk_rows;
  const std::int64_t next = begin + chunk_rows;  // the next chunk's first position
  const Key key = keys[next - 1];
  // Uniform over the block: the chunk's last run goes on past it, and it
  // started in this chunk (not in an earlier one, whose block adds it).
  if (key == sentinel || keys[next] != key) return;
  if (chunk > 0 && keys[begin] == key && keys[begin - 1] == key) return;

  // The run's last chunk is the one before the first chunk that does not
  // start with its key.
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int threads = blockDim.x * blockDim.y;
  if (tid == 0) stop_at = static_cast<int>(chunks);
  __syncthreads();
  for (std::int64_t base = chunk + 1; base < chunks; base += threads) {
    const std::int64_t j = base + tid;
    const bool stop = j < chunks && keys[j * chunk_rows] != key;
    if (stop) atomicMin(&stop_at, static_cast<int>(j));  // the smallest: order-free
    if (__syncthreads_or(stop)) break;
  }
  const std::int64_t stop = stop_at;

  const std::int64_t c = (static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * Vec;
  float acc[Vec];
#pragma unroll
  for (int i = 0; i < Vec; ++i) acc[i] = 0.f;
  if (c < dim) {
    if (threadIdx.y == 0) load_f32<Vec>(tail + chunk * pitch + c, acc);
#pragma unroll 4
    for (std::int64_t j = chunk + 1 + threadIdx.y; j < stop; j += blockDim.y) {
      float v[Vec];
      load_f32<Vec>(head + j * pitch + c, v);
#pragma unroll
      for (int i = 0; i < Vec; ++i) acc[i] += v[i];
    }
  }
#pragma unroll
  for (int i = 0; i < Vec; ++i) groups[tid * Vec + i] = acc[i];
  __syncthreads();
  if (threadIdx.y != 0 || c >= dim) return;
  for (unsigned g = 1; g < blockDim.y; ++g) {
    const float* other = groups + (g * blockDim.x + threadIdx.x) * Vec;
#pragma unroll
    for (int i = 0; i < Vec; ++i) acc[i] += other[i];
  }
  float* row = dtable + static_cast<std::int64_t>(key) * ld_table + c;
  float sum[Vec];
  load_f32<Vec>(row, sum);
#pragma unroll
  for (int i = 0; i < Vec; ++i) sum[i] += acc[i];
  store_f32<Vec>(row, sum);
}

// x: threads over the column vectors (a power of two from 32 up to
// `threads`); y: what is left of the block.
dim3 block_for(std::int64_t lanes, int threads) {
  int x = 32;
  while (x < threads && x < lanes) x *= 2;
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(threads / x));
}

// The chunk kernel's vector width: T's 16-byte vector where dout's rows
// allow it and the table's rows are 16-byte aligned (a vector of 8 bf16
// columns adds into 8 floats), else 1.
template <typename T>
int chunk_vec(const Mat& dtable, const Mat& dout) {
  constexpr int wide = kMaxVec<T>;
  const bool ok = dout.cols % wide == 0 && dout.ld % wide == 0 && aligned_for<T>(dout.data, wide) &&
                  dtable.ld % 4 == 0 && aligned_for<float>(dtable.data, 4);
  return ok ? wide : 1;
}

int combine_vec(const Mat& dtable) {
  const bool ok = dtable.cols % kCombineVec == 0 && dtable.ld % kCombineVec == 0 &&
                  aligned_for<float>(dtable.data, kCombineVec);
  return ok ? kCombineVec : 1;
}

}  // namespace

std::int64_t EmbeddingGradScratch::bytes_for(std::int64_t positions, std::int64_t dim,
                                             std::int64_t vocab) {
  // Positions are sorted as int32, and cub counts items in int.
  require(positions <= 2147483647, "embedding gradient", "too many positions");
  positions = std::max<std::int64_t>(positions, 1);
  const std::size_t sort = sort_temp_bytes(positions, key_bits(vocab));
  return static_cast<std::int64_t>(
      layout_for(positions, dim, static_cast<std::int64_t>(sort)).total);
}

EmbeddingGradScratch EmbeddingGradScratch::assigned(void* block, std::int64_t positions,
                                                    std::int64_t dim, std::int64_t vocab) {
  EmbeddingGradScratch s;
  s.block = block;
  s.positions = std::max<std::int64_t>(positions, 1);
  s.dim = dim;
  s.vocab = vocab;
  s.sort_bytes = static_cast<std::int64_t>(sort_temp_bytes(s.positions, key_bits(vocab)));
  return s;
}

namespace {

// The scratch's parts, at the offsets layout_for gives them.
struct ScratchParts {
  Key* keys_in;
  Key* keys_out;
  std::int32_t* pos_in;
  std::int32_t* pos_out;
  float* head;
  float* tail;
  void* temp;
};

ScratchParts parts_of(const EmbeddingGradScratch& scratch) {
  const Layout l = layout_for(scratch.positions, scratch.dim, scratch.sort_bytes);
  char* base = static_cast<char*>(scratch.block);
  return {reinterpret_cast<Key*>(base + l.keys_in),
          reinterpret_cast<Key*>(base + l.keys_out),
          reinterpret_cast<std::int32_t*>(base + l.pos_in),
          reinterpret_cast<std::int32_t*>(base + l.pos_out),
          reinterpret_cast<float*>(base + l.head),
          reinterpret_cast<float*>(base + l.tail),
          base + l.temp};
}

void require_fits(const char* name, const EmbeddingGradScratch& scratch, std::int64_t n,
                  std::int64_t dim, std::int64_t vocab) {
  require(!scratch.empty(), name, "no scratch was planned (a plan with embedding_grad sorted)");
  require(n <= scratch.positions && dim <= scratch.dim && vocab <= scratch.vocab, name,
          "the scratch was planned for " + std::to_string(scratch.positions) + " positions of " +
              std::to_string(scratch.dim) + " columns over " + std::to_string(scratch.vocab) +
              " rows; this call has " + std::to_string(n) + " of " + std::to_string(dim) +
              " over " + std::to_string(vocab));
}

}  // namespace

void embedding_grad_sort(const std::int32_t* tokens, std::int64_t n, std::int64_t vocab,
                         const EmbeddingGradScratch& scratch, cudaStream_t stream) {
  const char* name = "embedding_backward (sorted): the sort";
  if (n == 0) return;
  require_fits(name, scratch, n, 0, vocab);
  const int bits = key_bits(vocab);
  std::size_t temp = static_cast<std::size_t>(scratch.sort_bytes);
  // cub's storage grows with n and the bits; a smaller call fits in it, but
  // ask rather than assume.
  if (n != scratch.positions || bits != key_bits(scratch.vocab)) {
    require(sort_temp_bytes(n, bits) <= temp, name, "cub's sort needs more scratch than planned");
  }
  const ScratchParts p = parts_of(scratch);
  launch_kernel(sort_input_kernel, grid_for(n), kThreads, 0, stream, p.keys_in, p.pos_in, tokens,
                vocab, n);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(p.temp, temp, p.keys_in, p.keys_out, p.pos_in,
                                             p.pos_out, static_cast<int>(n), 0, bits, stream));
}

void embedding_grad_accumulate(Mat dtable, Mat dout, const EmbeddingGradScratch& scratch,
                               cudaStream_t stream) {
  const char* name = "embedding_backward (sorted)";
  if (!embedding_grad_has_work(name, dtable, dout)) return;
  const std::int64_t n = dout.rows;
  require_fits(name, scratch, n, dout.cols, dtable.rows);
  const ScratchParts p = parts_of(scratch);
  const std::int64_t pitch = partial_pitch(scratch.dim);
  const Key sentinel = static_cast<Key>(dtable.rows);
  const std::int64_t chunk_rows = embedding_chunk_rows(n);
  const std::int64_t chunks = ceil_div(n, chunk_rows);
  dispatch_float(dout.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_vec<T>(chunk_vec<T>(dtable, dout), [&](auto vec) {
      constexpr int Vec = decltype(vec)::value;
      const dim3 block = block_for(ceil_div(dout.cols, Vec), kChunkThreads);
      const dim3 grid(static_cast<unsigned>(ceil_div(chunks, block.y)),
                      static_cast<unsigned>(ceil_div(ceil_div(dout.cols, Vec), block.x)));
      launch_kernel(chunk_sums_kernel<T, Vec>, grid, block, 0, stream, dtable.ptr<float>(),
                    dtable.ld, dout.ptr<const T>(), dout.ld, p.keys_out, p.pos_out, p.head, p.tail,
                    pitch, sentinel, n, dout.cols, chunk_rows, chunks);
      CUDA_CHECK_LAUNCH();
    });
  });
  if (chunks < 2) return;  // no run crosses chunks
  auto combine = [&](auto vec) {
    constexpr int Vec = decltype(vec)::value;
    const dim3 block(kCombineLanes, kCombineGroups);
    const dim3 grid(static_cast<unsigned>(chunks),
                    static_cast<unsigned>(ceil_div(ceil_div(dout.cols, Vec), block.x)));
    launch_kernel(combine_runs_kernel<Vec>, grid, block, 0, stream, dtable.ptr<float>(), dtable.ld,
                  p.keys_out, p.head, p.tail, pitch, sentinel, dout.cols, chunk_rows, chunks);
    CUDA_CHECK_LAUNCH();
  };
  if (combine_vec(dtable) == kCombineVec) {
    combine(std::integral_constant<int, kCombineVec>{});
  } else {
    combine(std::integral_constant<int, 1>{});
  }
}

void embedding_backward_sorted(Mat dtable, const std::int32_t* tokens, Mat dout,
                               const EmbeddingGradScratch& scratch, cudaStream_t stream) {
  if (!embedding_grad_has_work("embedding_backward (sorted)", dtable, dout)) return;
  embedding_grad_sort(tokens, dout.rows, dtable.rows, scratch, stream);
  embedding_grad_accumulate(dtable, dout, scratch, stream);
}

}  // namespace tinyllama::cuda
