#include "bench_suite/environment.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace tinyllama::suite {
namespace {

std::string or_unknown(const std::string& s) {
  return s.empty() ? "unknown" : s;
}

std::string json_string(const nlohmann::json& j, const char* outer, const char* inner) {
  if (!j.is_object() || !j.contains(outer) || !j.at(outer).is_object()) return "";
  const nlohmann::json& o = j.at(outer);
  return o.contains(inner) && o.at(inner).is_string() ? o.at(inner).get<std::string>() : "";
}

}  // namespace

std::string source_tree() {
  return TINYLLAMA_SOURCE_DIR;
}

std::string first_line_of(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return "";
  std::array<char, 512> buffer{};
  std::string line;
  if (std::fgets(buffer.data(), buffer.size(), pipe)) line = buffer.data();
  while (std::fgets(buffer.data(), buffer.size(), pipe)) {
  }
  const int status = ::pclose(pipe);
  if (status != 0) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

std::map<std::string, std::string> collect_environment(const nlohmann::json& train_report,
                                                       const nlohmann::json& peer_report) {
  std::map<std::string, std::string> env;
  env["tinyllama"] = TINYLLAMA_VERSION;
  const std::string git = "git -C '" + source_tree() + "' ";
  std::string commit = first_line_of(git + "rev-parse --short=12 HEAD");
  if (!commit.empty() && !first_line_of(git + "status --porcelain --untracked-files=no").empty()) {
    commit += " (with uncommitted changes)";
  }
  env["commit"] = or_unknown(commit);
  std::array<char, 256> host{};
  env["host"] = ::gethostname(host.data(), host.size() - 1) == 0 ? host.data() : "unknown";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::array<char, 32> date{};
  std::strftime(date.data(), date.size(), "%Y-%m-%d %H:%M UTC", &utc);
  env["date"] = date.data();
  env["device"] = or_unknown(json_string(train_report, "device", "name"));
  env["cuda_cudnn"] = or_unknown(json_string(train_report, "device", "build"));
  env["driver"] = or_unknown(
      first_line_of("nvidia-smi --query-gpu=driver_version --format=csv,noheader --id=0"));
  if (peer_report.is_object() && peer_report.contains("torch_version")) {
    env["torch"] = peer_report.at("torch_version").get<std::string>();
  }
  return env;
}

}  // namespace tinyllama::suite
