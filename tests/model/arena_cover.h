#pragma once
// The bytes an arena's buffers cover together: the backward scratch laid
// over the logits (ActivationBuffer::over_logits) counted once.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/activation_plan.h"

namespace tinyllama {

inline std::int64_t covered_bytes(const std::vector<ActivationBuffer>& buffers) {
  std::int64_t covered = 0, reach = 0;
  for (const ActivationBuffer& b : buffers) {  // by offset (ActivationPlan::buffers)
    const std::int64_t end = b.slot.offset + b.bytes;
    covered += std::max<std::int64_t>(0, end - std::max(reach, b.slot.offset));
    reach = std::max(reach, end);
  }
  return covered;
}

}  // namespace tinyllama
