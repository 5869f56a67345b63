#pragma once
// A whole input file in memory, for the readers that validate what they
// read (tokenizer models, vocabularies, text): one way of saying that it is
// missing, a directory or unreadable.
#include <string>

namespace tinyllama {

// The file's bytes. Throws UsageError "FLAG PATH: no such file" (or "is a
// directory", "cannot open for reading: ..."); FLAG may be empty.
std::string read_file_bytes(const std::string& flag, const std::string& path);

}  // namespace tinyllama
