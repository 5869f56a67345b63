#include "io/json_file.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace tinyllama {

nlohmann::json read_json_object(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json();
}

nlohmann::json read_json_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(flag + " " + path + ": cannot be read");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw UsageError(flag + " " + path + ": not valid JSON");
  return j;
}

}  // namespace tinyllama
