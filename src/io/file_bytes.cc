#include "io/file_bytes.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/errors.h"

namespace tinyllama {

std::string read_file_bytes(const std::string& flag, const std::string& path) {
  const std::string name = flag.empty() ? path : flag + " " + path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw UsageError(name + ": no such file");
  if (std::filesystem::is_directory(path, ec)) throw UsageError(name + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UsageError(name + ": cannot open for reading: " + std::strerror(errno));
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw UsageError(name + ": cannot read");
  return bytes;
}

}  // namespace tinyllama
