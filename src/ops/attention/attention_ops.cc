#include "ops/attention/attention_ops.h"

#include <stdexcept>
#include <string>

namespace tinyllama {

void require_probs_match(AttentionImpl impl, Mat probs, const char* op) {
  const bool materialized = impl == AttentionImpl::Materialized;
  if (materialized == probs.empty()) {
    throw std::invalid_argument(std::string(op) + ": " + impl_name(impl) + " attention " +
                                (materialized ? "needs" : "takes no") + " probs buffer");
  }
}

}  // namespace tinyllama
