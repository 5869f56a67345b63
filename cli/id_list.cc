#include "id_list.h"

#include <sstream>

#include "train/flag_values.h"

namespace tinyllama::cli {

std::vector<std::int32_t> parse_id_list(const std::string& flag, const std::string& text) {
  std::vector<std::int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) ids.push_back(parse_int_flag(flag, item));
  return ids;
}

std::string id_list_text(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace tinyllama::cli
