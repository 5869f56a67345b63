#include "train/flag_values.h"

#include <charconv>
#include <limits>
#include <system_error>

#include "core/errors.h"

namespace tinyllama {
namespace {

// The value as the user typed it, quoted when it would otherwise vanish from
// the message (an empty string, or one with spaces).
std::string shown(const std::string& text) {
  if (text.empty() || text.find_first_of(" \t") != std::string::npos) return "'" + text + "'";
  return text;
}

[[noreturn]] void reject(std::string_view flag, const std::string& text,
                         const std::string& allowed) {
  throw UsageError(std::string(flag) + " " + shown(text) + ": " + allowed);
}

template <typename T>
bool parse_whole(const std::string& text, T& out) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;  // from_chars does not take a leading '+'
  auto [end, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && end == last && first != last;
}

}  // namespace

int parse_int_flag(std::string_view flag, const std::string& text) {
  long long value = 0;
  if (!parse_whole(text, value)) reject(flag, text, "expected an integer");
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    reject(flag, text,
           "out of range (at most " + std::to_string(std::numeric_limits<int>::max()) + ")");
  }
  return static_cast<int>(value);
}

std::uint64_t parse_uint64_flag(std::string_view flag, const std::string& text) {
  std::uint64_t value = 0;
  if (!text.empty() && text[0] == '-') reject(flag, text, "expected a non-negative integer");
  if (!parse_whole(text, value)) reject(flag, text, "expected a non-negative integer below 2^64");
  return value;
}

double parse_real_flag(std::string_view flag, const std::string& text) {
  double value = 0;
  if (!parse_whole(text, value)) reject(flag, text, "expected a number such as 3e-4");
  return value;
}

DeviceKind parse_device(const std::string& text) {
  if (text == "cpu") return DeviceKind::Cpu;
  if (text == "cuda") return DeviceKind::Cuda;
  reject("--device", text, "allowed values are cpu, cuda");
}

Precision parse_amp_dtype(const std::string& text) {
  if (text == "bfloat16") return Precision::amp(DType::BF16);
  if (text == "float16") return Precision::amp(DType::F16);
  if (text == "float8") return Precision::amp_fp8();
  reject("--amp-dtype", text, "allowed values are bfloat16, float16, float8");
}

Fp8Choice parse_fp8_gemms(const std::string& text) {
  if (text == "auto") return Fp8Choice::Auto;
  if (text == "all") return Fp8Choice::All;
  reject("--fp8-gemms", text, "allowed values are auto, all");
}

Fp8Scaling parse_fp8_scaling(const std::string& text) {
  if (text == "current") return Fp8Scaling::Current;
  if (text == "delayed") return Fp8Scaling::Delayed;
  reject("--fp8-scaling", text, "allowed values are current, delayed");
}

}  // namespace tinyllama
