#pragma once
// The one way every subcommand registers a value flag: kept as typed text
// (train/flag_values.h converts it by the project's rules), with its type
// and default shown in --help.
#include <CLI/CLI.hpp>
#include <string>

namespace tinyllama::cli {

inline CLI::Option* value(CLI::App* cmd, const std::string& flag, std::string& target,
                          const std::string& type, const std::string& help) {
  return cmd->add_option(flag, target, help)->type_name(type)->capture_default_str();
}

}  // namespace tinyllama::cli
