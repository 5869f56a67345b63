#pragma once
// CLI11 reports bad command lines in its own words, over several lines.
// DESIGN §4 wants one line naming the flag or value and what is allowed;
// this is the translation.
#include <CLI/CLI.hpp>
#include <string>

namespace tinyllama::cli {

std::string one_line_parse_error(const CLI::ParseError& error, const CLI::App& app);

}  // namespace tinyllama::cli
