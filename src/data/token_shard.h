#pragma once
// llm.c's tokenized shards (karpathy/llm.c, dev/data/data_common.py), so data
// users already tokenized trains here as it is: a header of 256 little-endian
// int32 -- [0] the magic 20240520, [1] the version 1, [2] the token count --
// then that many uint16 tokens. A training set is usually a glob of shards.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tinyllama {

constexpr std::int32_t kShardMagic = 20240520;
constexpr std::int32_t kShardVersion = 1;
constexpr std::size_t kShardHeaderBytes = 256 * sizeof(std::int32_t);

// Whether `data` starts like a shard (the magic number): how --data tells a
// shard from a text file.
bool looks_like_token_shard(const std::uint8_t* data, std::size_t size);

// The tokens of a whole shard in memory, validated (magic, version, the
// count against the size, nothing after the tokens). `name` stands for the
// file in the one-line RuntimeFailure.
std::vector<std::uint16_t> parse_token_shard(const std::string& name, const std::uint8_t* data,
                                             std::size_t size);

// Reads and validates a shard file (parse_token_shard's rules).
std::vector<std::uint16_t> read_token_shard(const std::string& path);

// Writes a shard atomically (io/atomic_file.h).
void write_token_shard(const std::string& path, const std::vector<std::uint16_t>& tokens);

}  // namespace tinyllama
