#include "data/token_shard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/errors.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

template <typename T>
std::vector<std::uint8_t> shard_bytes(std::int32_t magic, std::int32_t version, std::int32_t count,
                                      const std::vector<T>& tokens) {
  std::vector<std::uint8_t> out(kShardHeaderBytes + tokens.size() * sizeof(T));
  const std::int32_t header[3] = {magic, version, count};
  std::memcpy(out.data(), header, sizeof header);
  std::memcpy(out.data() + kShardHeaderBytes, tokens.data(), tokens.size() * sizeof(T));
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

std::vector<std::uint8_t> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path temp_shard(const std::string& tag) {
  return fs::temp_directory_path() / ("tl_shard_" + tag + std::to_string(::getpid()));
}

TEST(TokenShard, WritesLlmcUint16LayoutAndReadsItBack) {
  const fs::path path = temp_shard("narrow");
  const std::vector<std::uint32_t> tokens = {50256, 15496, 11, 995, 0, 65535};
  write_token_shard(path.string(), tokens);
  EXPECT_EQ(fs::file_size(path), 1024u + 12u);
  const std::vector<std::uint16_t> narrow(tokens.begin(), tokens.end());
  EXPECT_EQ(file_bytes(path), shard_bytes(20240520, 1, 6, narrow));
  const TokenShard back = read_token_shard(path.string());
  EXPECT_EQ(back.tokens, tokens);
  EXPECT_FALSE(back.wide);
  EXPECT_FALSE(back.tokenizer.recorded());
  fs::remove(path);
}

TEST(TokenShard, AVocabularyPast65536IdsTakesLlmcsUint32Variant) {
  const fs::path path = temp_shard("wide");
  // Every token fits 16 bits, but the tokenizer's vocabulary does not: the
  // width follows the vocabulary, so all shards of one corpus share it.
  const ShardTokenizer big{128256, 0x0123456789ABCDEFULL};
  const std::vector<std::uint32_t> tokens = {128000, 9906, 1917, 0, 65536, 128255};
  write_token_shard(path.string(), tokens, big);
  EXPECT_EQ(fs::file_size(path), 1024u + 24u);
  std::vector<std::uint8_t> expected = shard_bytes(20240801, 7, 6, tokens);
  const std::int32_t record[4] = {0x544F4B31, 128256, static_cast<std::int32_t>(0x89ABCDEF),
                                  0x01234567};
  std::memcpy(expected.data() + 12, record, sizeof record);
  EXPECT_EQ(file_bytes(path), expected);
  const TokenShard back = read_token_shard(path.string());
  EXPECT_EQ(back.tokens, tokens);
  EXPECT_TRUE(back.wide);
  EXPECT_EQ(back.tokenizer, big);
  EXPECT_EQ(read_shard_tokenizer(path.string()), big);

  const std::vector<std::uint32_t> large_ids = {70000, 3};  // no tokenizer: the ids decide
  write_token_shard(path.string(), large_ids);
  EXPECT_TRUE(read_token_shard(path.string()).wide);
  EXPECT_EQ(read_token_shard(path.string()).tokens, large_ids);
  fs::remove(path);
}

TEST(TokenShard, RecordsTheTokenizerInANarrowShardTooAndLlmcShardsRecordNone) {
  const fs::path path = temp_shard("record");
  const ShardTokenizer t{8000, 0xFEDCBA9876543210ULL};
  write_token_shard(path.string(), {1, 7999, 2}, t);
  const TokenShard back = read_token_shard(path.string());
  EXPECT_FALSE(back.wide);
  EXPECT_EQ(back.tokenizer, t);
  const std::vector<std::uint16_t> plain = {1, 2};
  const std::vector<std::uint8_t> llmc = shard_bytes(kShardMagic, 1, 2, plain);
  EXPECT_FALSE(parse_token_shard("llmc", llmc.data(), llmc.size()).tokenizer.recorded());
  EXPECT_FALSE(read_shard_tokenizer("/nonexistent/shard.bin").recorded());
  fs::remove(path);
}

TEST(TokenShard, RefusesCorruptShardsNamingTheFile) {
  const std::vector<std::uint16_t> t = {1, 2, 3};
  const std::vector<std::uint32_t> wide = {1, 2, 3};
  EXPECT_EQ(parse_token_shard("s", shard_bytes(kShardMagic, 1, 3, t).data(), 1024 + 6).tokens,
            wide);
  EXPECT_NE(error_of(shard_bytes(123, 1, 3, t)).find("s.bin: not a token shard (magic 123"),
            std::string::npos);
  EXPECT_NE(error_of(shard_bytes(kShardMagic, 2, 3, t)).find("version 2"), std::string::npos);
  EXPECT_NE(error_of(shard_bytes(kWideShardMagic, 1, 3, wide)).find("goes with version 7"),
            std::string::npos);
  EXPECT_NE(error_of(shard_bytes(kShardMagic, 1, 4, t)).find("counts 4 tokens"), std::string::npos);
  EXPECT_NE(error_of(shard_bytes(kShardMagic, 1, -1, t)).find("counts -1 tokens"),
            std::string::npos);
  // A uint16 shard read as uint32 would be half as long: the count says so.
  EXPECT_NE(error_of(shard_bytes(kWideShardMagic, 7, 3, t)).find("counts 3 tokens"),
            std::string::npos);
  std::vector<std::uint8_t> odd = shard_bytes(kShardMagic, 1, 3, t);
  odd.push_back(7);
  EXPECT_NE(error_of(odd).find("stray bytes"), std::string::npos);
  EXPECT_NE(error_of({1, 2, 3}).find("too short (3 bytes)"), std::string::npos);
}

}  // namespace
}  // namespace tinyllama
