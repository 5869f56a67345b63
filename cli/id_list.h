#pragma once
// Token ids on the command line and in output: comma-separated, as
// `generate --prompt-ids`, `generate --print-ids` and `tokenizer
// encode|decode` read and print them.
#include <cstdint>
#include <string>
#include <vector>

namespace tinyllama::cli {

// "3,1,4" -> {3, 1, 4}; throws UsageError naming `flag` for an item that is
// not an integer.
std::vector<std::int32_t> parse_id_list(const std::string& flag, const std::string& text);

// {3, 1, 4} -> "3,1,4".
std::string id_list_text(const std::vector<std::int32_t>& ids);

}  // namespace tinyllama::cli
