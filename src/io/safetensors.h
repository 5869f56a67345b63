#pragma once
// The safetensors file format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON describing each
// tensor's dtype, shape and byte range, then the raw little-endian data.
// We use it for checkpoints and run dumps because PyTorch, transformers and
// numpy read it without any tinyllama code.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tinyllama {

// One tensor as raw bytes: the caller decides how to interpret them, so the
// file layer never converts (and never loses) data.
struct TensorData {
  std::string dtype;  // safetensors spelling: "F32", "BF16", "I32", ...
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
  std::int64_t numel() const;  // 1 for a scalar (empty shape)
};

// A vector rather than a map: the order is the order of the data in the file.
using NamedTensors = std::vector<std::pair<std::string, TensorData>>;

// Written through io/atomic_file.h (a unique temporary file synced and
// renamed over `path`), so a crash or a full disk never leaves a truncated
// file under the real name. Throws RuntimeFailure naming the file on I/O
// errors or inconsistent tensors.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Tensors in file order of their data offsets. Validates the whole file
// before trusting any of it; throws RuntimeFailure with one line naming the
// file and the problem.
NamedTensors read_safetensors(const std::string& path);

// The same validation and result for a whole file already in memory; `name`
// stands for the file in messages (the fuzz target reads through this).
NamedTensors parse_safetensors(const std::string& name, const std::uint8_t* data, std::size_t size);

// The "__metadata__" strings of a file (empty when absent); validates like
// read_safetensors but reads only the header.
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

// Bytes per element of a safetensors dtype; 0 if unknown.
std::size_t safetensors_dtype_size(const std::string& dtype);

}  // namespace tinyllama
