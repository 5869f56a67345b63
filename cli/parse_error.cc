#include "parse_error.h"

#include <string_view>

namespace tinyllama::cli {
namespace {

// The first "--flag" in a CLI11 message: every message about an option
// names it that way.
std::string first_flag(const std::string& message) {
  const std::size_t at = message.find("--");
  if (at == std::string::npos) return "";
  const std::size_t end = message.find_first_of(" :,=", at);
  return message.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The subcommand the user chose, if CLI11 got as far as seeing it.
const CLI::App* chosen_command(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->parsed()) return sub;
  }
  return nullptr;
}

std::string help_hint(const CLI::App& app) {
  const CLI::App* cmd = chosen_command(app);
  return "see '" + app.get_name() + (cmd ? " " + cmd->get_name() : "") + " --help'";
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::string unexpected_arguments(const std::string& message, const CLI::App& app) {
  const std::size_t colon = message.find(": ");
  const std::string args = colon == std::string::npos ? message : message.substr(colon + 2);
  const std::string first = args.substr(0, args.find(' '));
  if (first.rfind('-', 0) == 0) {
    return first.substr(0, first.find('=')) + ": unknown flag; " + help_hint(app);
  }
  if (chosen_command(app) == nullptr) {
    return first + ": unknown command; available: train (" + help_hint(app) + ")";
  }
  return first + ": unexpected argument (flags take the form --name VALUE); " + help_hint(app);
}

std::string missing_value(const std::string& flag, const CLI::App& app) {
  const CLI::App* cmd = chosen_command(app);
  const CLI::Option* opt = cmd ? cmd->get_option_no_throw(flag) : app.get_option_no_throw(flag);
  std::string expected = opt ? opt->get_type_name() : "";
  return flag + ": missing value" + (expected.empty() ? "" : "; expected " + expected);
}

}  // namespace

std::string one_line_parse_error(const CLI::ParseError& error, const CLI::App& app) {
  const std::string message = first_line(error.what());
  const std::string name = error.get_name();
  if (name == "ExtrasError") return unexpected_arguments(message, app);
  if (name == "ArgumentMismatch") {
    const std::string flag = first_flag(message);
    if (!flag.empty()) return missing_value(flag, app);
  }
  return message + "; " + help_hint(app);
}

}  // namespace tinyllama::cli
