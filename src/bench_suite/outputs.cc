#include "bench_suite/outputs.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench_suite/plots.h"
#include "io/atomic_file.h"

namespace tinyllama::suite {
namespace {

std::string write_text(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::path(dir) / name).string();
  write_atomically("--out", path, [&](FileSink& out) { out.write(text); });
  return path;
}

// The report's Markdown with its plots shown under it.
std::string with_plots(std::string markdown, const std::vector<NamedSvg>& plots) {
  if (plots.empty()) return markdown;
  markdown += "\n## Plots\n\n";
  for (const NamedSvg& plot : plots) markdown += "![" + plot.file + "](" + plot.file + ")\n\n";
  return markdown;
}

std::vector<std::string> write_all(const std::string& dir,
                                   const std::vector<std::pair<std::string, std::string>>& files,
                                   const std::vector<NamedSvg>& plots) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> written;
  written.reserve(files.size() + plots.size());
  for (const auto& [name, text] : files) written.push_back(write_text(dir, name, text));
  for (const NamedSvg& plot : plots) written.push_back(write_text(dir, plot.file, plot.svg));
  return written;
}

}  // namespace

std::vector<std::string> write_bench_outputs(const BenchReport& report, const std::string& dir) {
  const std::vector<NamedSvg> plots = bench_plots(report);
  return write_all(dir,
                   {{"bench.json", to_json(report).dump(2) + "\n"},
                    {"bench.csv", to_csv(report)},
                    {"bench.md", with_plots(to_markdown(report), plots)}},
                   plots);
}

std::vector<std::string> write_compare_outputs(const CompareReport& report,
                                               const std::string& dir) {
  return write_all(
      dir, {{"compare.json", to_json(report).dump(2) + "\n"}, {"compare.md", to_markdown(report)}},
      compare_plots(report));
}

}  // namespace tinyllama::suite
