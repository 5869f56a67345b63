#pragma once
// Every check of a run's options that needs no device, run before anything
// is allocated so a bad command line fails at once with one line (exit 2)
// instead of after minutes of setup.
#include <string>

#include "train/options.h"

namespace tinyllama {

// Throws UsageError naming the first bad flag, its value and what is allowed.
void validate_options(const TrainOptions& opts);

// Output files are written after the work: a bad path must be found before
// it (io/atomic_file.h check_output_path: a missing or unwritable directory,
// a directory, a target that is never replaced). Throws UsageError
// "FLAG PATH: reason"; an empty path passes.
void require_parent_directory(const char* flag, const std::string& path);

}  // namespace tinyllama
