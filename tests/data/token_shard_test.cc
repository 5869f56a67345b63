#include "data/token_shard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/errors.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> shard_bytes(std::int32_t magic, std::int32_t version, std::int32_t count,
                                      const std::vector<std::uint16_t>& tokens) {
  std::vector<std::uint8_t> out(kShardHeaderBytes + tokens.size() * 2);
  const std::int32_t header[3] = {magic, version, count};
  std::memcpy(out.data(), header, sizeof header);
  std::memcpy(out.data() + kShardHeaderBytes, tokens.data(), tokens.size() * 2);
  return out;
}

std::string error_of(const std::vector<std::uint8_t>& bytes) {
  try {
    parse_token_shard("s.bin", bytes.data(), bytes.size());
  } catch (const RuntimeFailure& e) {
    return e.what();
  }
  return "";
}

TEST(TokenShard, WritesLlmcLayoutAndReadsItBack) {
  const fs::path path = fs::temp_directory_path() / ("tl_shard_" + std::to_string(::getpid()));
  const std::vector<std::uint16_t> tokens = {50256, 15496, 11, 995, 0, 65535};
  write_token_shard(path.string(), tokens);
  EXPECT_EQ(fs::file_size(path), 1024u + 12u);
  EXPECT_EQ(read_token_shard(path.string()), tokens);
  const std::vector<std::uint8_t> expected = shard_bytes(20240520, 1, 6, tokens);
  EXPECT_TRUE(looks_like_token_shard(expected.data(), expected.size()));
  fs::remove(path);
}

TEST(TokenShard, RefusesCorruptShardsNamingTheFile) {
  const std::vector<std::uint16_t> t = {1, 2, 3};
  EXPECT_EQ(parse_token_shard("s", shard_bytes(kShardMagic, 1, 3, t).data(), 1024 + 6), t);
  EXPECT_NE(error_of(shard_bytes(123, 1, 3, t)).find("s.bin: not a token shard (magic 123"),
            std::string::npos);
  EXPECT_NE(error_of(shard_bytes(kShardMagic, 2, 3, t)).find("version 2"), std::string::npos);
  EXPECT_NE(error_of(shard_bytes(kShardMagic, 1, 4, t)).find("counts 4 tokens"), std::string::npos);
  EXPECT_NE(error_of(shard_bytes(kShardMagic, 1, -1, t)).find("counts -1 tokens"),
            std::string::npos);
  std::vector<std::uint8_t> odd = shard_bytes(kShardMagic, 1, 3, t);
  odd.push_back(7);
  EXPECT_NE(error_of(odd).find("stray byte"), std::string::npos);
  EXPECT_NE(error_of({1, 2, 3}).find("too short (3 bytes)"), std::string::npos);
}

}  // namespace
}  // namespace tinyllama
