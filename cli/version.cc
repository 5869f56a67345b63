#include "version.h"

#include "cuda/cuda_entry.h"

namespace tinyllama::cli {

std::string version_text() {
  return std::string("tinyllama ") + TINYLLAMA_VERSION + "\n" + cuda_build_versions();
}

}  // namespace tinyllama::cli
