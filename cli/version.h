#pragma once
// What `tinyllama --version` prints.
#include <string>

namespace tinyllama::cli {

// "tinyllama 0.1.0" and, on a second line, the CUDA/cuDNN versions the
// binary was built with: a timing report is only comparable with that.
std::string version_text();

}  // namespace tinyllama::cli
