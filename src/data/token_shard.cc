#include "data/token_shard.h"

#include <algorithm>
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

ShardTokenizer recorded_tokenizer(const std::uint8_t* data) {
  if (header_field(data, 3) != kTokenizerRecordTag) return {};
  ShardTokenizer t;
  t.vocab_size = header_field(data, 4);
  t.fingerprint = static_cast<std::uint32_t>(header_field(data, 5)) |
                  static_cast<std::uint64_t>(static_cast<std::uint32_t>(header_field(data, 6)))
                      << 32;
  return t;
}

template <typename T>
std::vector<std::uint32_t> widen(const std::uint8_t* data, std::size_t count) {
  std::vector<T> raw(count);
  if (count > 0) std::memcpy(raw.data(), data, count * sizeof(T));
  return {raw.begin(), raw.end()};
}

}  // namespace

bool looks_like_token_shard(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return false;
  const std::int32_t magic = header_field(data, 0);
  return magic == kShardMagic || magic == kWideShardMagic;
}

TokenShard parse_token_shard(const std::string& name, const std::uint8_t* data, std::size_t size) {
  if (size < kShardHeaderBytes) {
    fail(name, "too short (" + std::to_string(size) + " bytes) for the " +
                   std::to_string(kShardHeaderBytes) + "-byte token shard header");
  }
  const std::int32_t magic = header_field(data, 0);
  if (magic != kShardMagic && magic != kWideShardMagic) {
    fail(name, "not a token shard (magic " + std::to_string(magic) + ", expected " +
                   std::to_string(kShardMagic) + " or " + std::to_string(kWideShardMagic) + ")");
  }
  TokenShard shard;
  shard.wide = magic == kWideShardMagic;
  const std::int32_t version = shard.wide ? kWideShardVersion : kShardVersion;
  if (header_field(data, 1) != version) {
    fail(name, "token shard version " + std::to_string(header_field(data, 1)) + " (magic " +
                   std::to_string(magic) + " goes with version " + std::to_string(version) +
                   (shard.wide ? ": uint32 tokens)" : ": uint16 tokens)"));
  }
  const std::size_t width = shard.wide ? 4 : 2;
  const std::int32_t count = header_field(data, 2);
  const std::size_t payload = size - kShardHeaderBytes;
  if (count < 0 || static_cast<std::size_t>(count) * width != payload) {
    fail(name, "the header counts " + std::to_string(count) + " tokens but the file holds " +
                   std::to_string(payload) + " bytes after it (" + std::to_string(payload / width) +
                   (payload % width ? " tokens and stray bytes)" : " tokens)"));
  }
  const std::uint8_t* body = data + kShardHeaderBytes;
  const auto n = static_cast<std::size_t>(count);
  shard.tokens = shard.wide ? widen<std::uint32_t>(body, n) : widen<std::uint16_t>(body, n);
  shard.tokenizer = recorded_tokenizer(data);
  return shard;
}

TokenShard read_token_shard(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, "cannot read");
  return parse_token_shard(path, bytes.data(), bytes.size());
}

ShardTokenizer read_shard_tokenizer(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint8_t header[kShardHeaderBytes];
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) return {};
  return looks_like_token_shard(header, sizeof header) ? recorded_tokenizer(header)
                                                       : ShardTokenizer{};
}

void write_token_shard(const std::string& path, const std::vector<std::uint32_t>& tokens,
                       const ShardTokenizer& tokenizer) {
  if (tokens.size() > static_cast<std::size_t>(INT32_MAX)) {
    fail(path, "too many tokens for one shard (" + std::to_string(tokens.size()) + ")");
  }
  const std::int64_t largest =
      tokens.empty() ? 0 : std::int64_t{*std::max_element(tokens.begin(), tokens.end())};
  const std::int64_t vocab = tokenizer.recorded() ? tokenizer.vocab_size : largest + 1;
  const bool wide = std::max(vocab, largest + 1) > kNarrowShardVocab;
  std::int32_t header[256] = {};
  header[0] = wide ? kWideShardMagic : kShardMagic;
  header[1] = wide ? kWideShardVersion : kShardVersion;
  header[2] = static_cast<std::int32_t>(tokens.size());
  if (tokenizer.recorded()) {
    header[3] = kTokenizerRecordTag;
    header[4] = tokenizer.vocab_size;
    header[5] = static_cast<std::int32_t>(static_cast<std::uint32_t>(tokenizer.fingerprint));
    header[6] = static_cast<std::int32_t>(static_cast<std::uint32_t>(tokenizer.fingerprint >> 32));
  }
  std::vector<std::uint16_t> narrow;
  if (!wide) narrow.assign(tokens.begin(), tokens.end());
  write_atomically("", path, [&](FileSink& out) {
    out.write(header, sizeof header);
    if (wide) {
      out.write(tokens.data(), tokens.size() * sizeof(std::uint32_t));
    } else {
      out.write(narrow.data(), narrow.size() * sizeof(std::uint16_t));
    }
  });
}

}  // namespace tinyllama
