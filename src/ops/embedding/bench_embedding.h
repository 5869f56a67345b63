#pragma once
// The kernel bench's cases of the token embedding (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"

namespace tinyllama::bench {

// The embedding's tokens uniform over the
// vocabulary, or skewed like text's (Zipf), which is what separates the
// gradient's scan and sorted kernels.
std::unique_ptr<OpCase> make_embedding(BenchContext& ctx, Pass pass, bool zipf_tokens = false);

}  // namespace tinyllama::bench
