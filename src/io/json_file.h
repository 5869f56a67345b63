#pragma once
// Reading back a JSON file that a run wrote (a train or peer --json, a
// profile summary, an earlier bench.json), the one way every command does.
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tinyllama {

// The JSON object in the file at path; null when the file is missing,
// cannot be read, is not valid JSON or holds something other than an object.
nlohmann::json read_json_object(const std::string& path);

// The JSON in the file at path, named by the flag that gave it. Throws
// UsageError "FLAG PATH: cannot be read" or "FLAG PATH: not valid JSON".
nlohmann::json read_json_file(const std::string& flag, const std::string& path);

}  // namespace tinyllama
