#include "parse_error.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <vector>

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

// "train, kernels": the commands registered, in order.
std::string command_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return names;
}

std::string help_hint(const CLI::App& app) {
  const CLI::App* cmd = chosen_command(app);
  return "see '" + app.get_name() + (cmd ? " " + cmd->get_name() : "") + " --help'";
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string unexpected_arguments(const std::string& message, const CLI::App& app) {
  const std::size_t colon = message.find(": ");
  // CLI11 lists the extras in reverse order of the command line.
  std::vector<std::string> extras =
      words(colon == std::string::npos ? message : message.substr(colon + 2));
  std::reverse(extras.begin(), extras.end());
  if (extras.empty()) return message + "; " + help_hint(app);
  for (const std::string& w : extras) {
    if (w.rfind('-', 0) == 0) return w.substr(0, w.find('=')) + ": unknown flag; " + help_hint(app);
  }
  if (chosen_command(app) == nullptr) {
    return extras.front() + ": unknown command; available: " + command_names(app) + " (" +
           help_hint(app) + ")";
  }
  return extras.front() + ": unexpected argument (flags take the form --name VALUE); " +
         help_hint(app);
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
  // Matched by type: CLI11 names some errors after the app that raised them.
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr)
    return unexpected_arguments(message, app);
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    const std::string flag = first_flag(message);
    if (!flag.empty()) return missing_value(flag, app);
  }
  return message + "; " + help_hint(app);
}

}  // namespace tinyllama::cli
