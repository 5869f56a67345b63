#include "data/token_shard.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/errors.h"
#include "io/atomic_file.h"

namespace tinyllama {

// Tokens go to and from disk by memcpy; a big-endian host would need swaps.
static_assert(std::endian::native == std::endian::little, "shards are little-endian");

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw RuntimeFailure(name + ": " + problem);
}

std::int32_t header_field(const std::uint8_t* data, int i) {
  std::int32_t v = 0;
  std::memcpy(&v, data + 4 * i, 4);
  return v;
}

}  // namespace

bool looks_like_token_shard(const std::uint8_t* data, std::size_t size) {
  return size >= 4 && header_field(data, 0) == kShardMagic;
}

std::vector<std::uint16_t> parse_token_shard(const std::string& name, const std::uint8_t* data,
                                             std::size_t size) {
  if (size < kShardHeaderBytes) {
    fail(name, "too short (" + std::to_string(size) + " bytes) for the " +
                   std::to_string(kShardHeaderBytes) + "-byte token shard header");
  }
  if (header_field(data, 0) != kShardMagic) {
    fail(name, "not a token shard (magic " + std::to_string(header_field(data, 0)) + ", expected " +
                   std::to_string(kShardMagic) + ")");
  }
  if (header_field(data, 1) != kShardVersion) {
    fail(name, "token shard version " + std::to_string(header_field(data, 1)) +
                   " (this reader knows version 1: uint16 tokens)");
  }
  const std::int32_t count = header_field(data, 2);
  const std::size_t payload = size - kShardHeaderBytes;
  if (count < 0 || static_cast<std::size_t>(count) * 2 != payload) {
    fail(name, "the header counts " + std::to_string(count) + " tokens but the file holds " +
                   std::to_string(payload) + " bytes after it (" + std::to_string(payload / 2) +
                   (payload % 2 ? " tokens and a stray byte)" : " tokens)"));
  }
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(count));
  if (count > 0) std::memcpy(tokens.data(), data + kShardHeaderBytes, payload);
  return tokens;
}

std::vector<std::uint16_t> read_token_shard(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, "cannot read");
  return parse_token_shard(path, bytes.data(), bytes.size());
}

void write_token_shard(const std::string& path, const std::vector<std::uint16_t>& tokens) {
  if (tokens.size() > static_cast<std::size_t>(INT32_MAX)) {
    fail(path, "too many tokens for one shard (" + std::to_string(tokens.size()) + ")");
  }
  std::int32_t header[256] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<std::int32_t>(tokens.size());
  write_atomically("", path, [&](FileSink& out) {
    out.write(header, sizeof header);
    out.write(tokens.data(), tokens.size() * sizeof(std::uint16_t));
  });
}

}  // namespace tinyllama
