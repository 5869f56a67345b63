#include "data/token_dataset.h"

#include <glob.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

#include "core/errors.h"
#include "core/fingerprint.h"
#include "data/byte_tokenizer.h"

namespace tinyllama {
namespace {

std::string tokenizer_text(const ShardTokenizer& t) {
  return t.recorded() ? "tokenizer vocabulary " + std::to_string(t.vocab_size) + ", fingerprint " +
                            fingerprint_hex(t.fingerprint)
                      : "byte-level tokens or no tokenizer recorded";
}

// Tokens of two tokenizers in one run would train on meaningless ids.
void require_one_tokenizer(const std::string& flag, const TokenDataset& data) {
  for (const TokenPart& p : data.parts) {
    if (!(p.tokenizer == data.parts.front().tokenizer)) {
      throw UsageError(flag + " " + p.file + ": made by another tokenizer (" +
                       tokenizer_text(p.tokenizer) + ") than " + data.parts.front().file + " (" +
                       tokenizer_text(data.parts.front().tokenizer) + ")");
    }
  }
}

}  // namespace

std::vector<std::string> expand_input_pattern(const std::string& flag, const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0) out.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  if (out.empty()) {
    const bool wildcard = pattern.find_first_of("*?[") != std::string::npos;
    throw UsageError(flag + " " + pattern + ": " +
                     (wildcard ? "the pattern matches no file" : "no such file"));
  }
  return out;
}

namespace {

TokenPart read_part(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UsageError(flag + " " + path + ": is a directory (name its files, e.g. " + path +
                     "/train_*.bin)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UsageError(flag + " " + path + ": cannot open for reading: " + std::strerror(errno));
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  TokenPart part;
  part.file = path;
  if (looks_like_token_shard(data, bytes.size())) {
    TokenShard shard = parse_token_shard(path, data, bytes.size());
    part.tokens = std::move(shard.tokens);
    part.tokenizer = shard.tokenizer;
    return part;
  }
  const std::size_t bad = first_invalid_utf8(bytes);
  if (bad != std::string_view::npos) {
    throw UsageError(flag + " " + path + ": neither a token shard (magic " +
                     std::to_string(kShardMagic) + ") nor UTF-8 text (invalid byte at offset " +
                     std::to_string(bad) + ")");
  }
  const std::vector<std::uint16_t> tokens = encode_document(bytes);
  part.tokens.assign(tokens.begin(), tokens.end());
  return part;
}

}  // namespace

std::int64_t TokenDataset::tokens() const {
  std::int64_t n = 0;
  for (const TokenPart& p : parts) n += static_cast<std::int64_t>(p.tokens.size());
  return n;
}

int TokenDataset::max_token() const {
  int m = -1;
  for (const TokenPart& p : parts) {
    if (!p.tokens.empty())
      m = std::max(m, static_cast<int>(*std::max_element(p.tokens.begin(), p.tokens.end())));
  }
  return m;
}

ShardTokenizer TokenDataset::tokenizer() const {
  return parts.empty() ? ShardTokenizer{} : parts.front().tokenizer;
}

std::string TokenDataset::description() const {
  const ShardTokenizer t = tokenizer();
  return std::to_string(parts.size()) + (parts.size() == 1 ? " file, " : " files, ") +
         std::to_string(tokens()) + " tokens" + (t.recorded() ? ", " + tokenizer_text(t) : "");
}

std::string TokenDataset::fingerprint() const {
  std::string out;
  for (const TokenPart& p : parts) {
    out += (out.empty() ? "" : ";") + p.file + ":" + std::to_string(p.tokens.size());
  }
  return out;
}

TokenDataset load_token_dataset(const std::string& flag, const std::vector<std::string>& patterns) {
  TokenDataset data;
  for (const std::string& pattern : patterns) {
    for (const std::string& path : expand_input_pattern(flag, pattern))
      data.parts.push_back(read_part(flag, path));
  }
  require_one_tokenizer(flag, data);
  return data;
}

std::pair<TokenDataset, TokenDataset> split_tail(const TokenDataset& data, double fraction) {
  TokenDataset keep;
  TokenDataset held;
  for (const TokenPart& p : data.parts) {
    const auto n = p.tokens.size();
    const auto cut = n - static_cast<std::size_t>(static_cast<double>(n) * fraction);
    keep.parts.push_back(
        {p.file, {p.tokens.begin(), p.tokens.begin() + static_cast<long>(cut)}, p.tokenizer});
    held.parts.push_back(
        {p.file, {p.tokens.begin() + static_cast<long>(cut), p.tokens.end()}, p.tokenizer});
  }
  return {std::move(keep), std::move(held)};
}

}  // namespace tinyllama
