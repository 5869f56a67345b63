#pragma once
// Where a bench or compare ran, for its JSON and Markdown: the GPU and the
// CUDA/cuDNN versions (as the first successful train run reported them, so
// the bench process itself never opens a CUDA context that would sit beside
// its points on the device), the driver, the commit, the host and the date.
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tinyllama::suite {

// train_report: a train --json of this bench (null: none succeeded).
// peer_report: a peer's JSON (null: no peer ran); adds the torch version.
std::map<std::string, std::string> collect_environment(const nlohmann::json& train_report,
                                                       const nlohmann::json& peer_report);

// The source tree this binary was built from (its scripts: the peer).
std::string source_tree();

// The first line a shell command prints, trimmed; "" when it fails.
std::string first_line_of(const std::string& command);

}  // namespace tinyllama::suite
