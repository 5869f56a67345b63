#pragma once
// A file's identity for records that must recognise it again (the tokenizer
// a shard or a model was made with): 64-bit FNV-1a over its bytes. Not a
// defence against forgery, only against mixing up two honest files.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace tinyllama {

inline std::uint64_t fingerprint_of(std::string_view bytes) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ULL;
  }
  return h;
}

// 16 lowercase hex digits, how records and messages print a fingerprint.
inline std::string fingerprint_hex(std::uint64_t f) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(f));
  return text;
}

}  // namespace tinyllama
