#include "data/prepare.h"

#include <cstdio>
#include <filesystem>
#include <regex>

#include "core/errors.h"
#include "data/token_dataset.h"
#include "data/token_shard.h"
#include "io/atomic_file.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

std::string shard_name(const std::string& dir, const char* split, int index) {
  char name[32];
  std::snprintf(name, sizeof name, "%s_%06d.bin", split, index);
  return (fs::path(dir) / name).string();
}

// Shards of an earlier run would join a glob of this one's.
void require_no_shards(const std::string& dir) {
  static const std::regex kShard("(train|val)_[0-9]{6}\\.bin");
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (std::regex_match(e.path().filename().string(), kShard)) {
      throw UsageError("--output-dir " + dir + ": holds shards already (" +
                       e.path().filename().string() + "); choose an empty directory");
    }
  }
}

}  // namespace

PrepareResult prepare_shards(const std::vector<std::string>& inputs, const std::string& out_dir,
                             double val_fraction, std::int64_t shard_tokens) {
  if (!(val_fraction >= 0 && val_fraction < 1)) {
    throw UsageError("--val-fraction " + std::to_string(val_fraction) + ": must be in [0, 1)");
  }
  if (shard_tokens < 1 || shard_tokens > INT32_MAX) {
    throw UsageError("--shard-tokens " + std::to_string(shard_tokens) +
                     ": must be between 1 and 2147483647");
  }
  check_output_directory("--output-dir", out_dir);
  const TokenDataset data = load_token_dataset("--input", inputs);
  if (data.max_token() > 65535) throw UsageError("--input: a token does not fit uint16");
  fs::create_directories(out_dir);
  require_no_shards(out_dir);

  std::vector<std::uint16_t> all;
  for (const TokenPart& p : data.parts) all.insert(all.end(), p.tokens.begin(), p.tokens.end());
  const auto val_count = static_cast<std::size_t>(static_cast<double>(all.size()) * val_fraction);
  const std::size_t train_count = all.size() - val_count;

  PrepareResult r;
  r.train_tokens = static_cast<std::int64_t>(train_count);
  r.val_tokens = static_cast<std::int64_t>(val_count);
  r.max_token = data.max_token();
  if (val_count > 0) {
    r.files.push_back(shard_name(out_dir, "val", 0));
    write_token_shard(r.files.back(), {all.begin() + static_cast<long>(train_count), all.end()});
  }
  int index = 0;
  for (std::size_t at = 0; at < train_count; at += static_cast<std::size_t>(shard_tokens)) {
    const std::size_t end = std::min(train_count, at + static_cast<std::size_t>(shard_tokens));
    r.files.push_back(shard_name(out_dir, "train", index++));
    write_token_shard(r.files.back(),
                      {all.begin() + static_cast<long>(at), all.begin() + static_cast<long>(end)});
  }
  return r;
}

}  // namespace tinyllama
