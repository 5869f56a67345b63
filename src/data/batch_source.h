#pragma once
// Where a run's batches come from: the synthetic pool (train/synthetic_data.h)
// or a token dataset (data/batch_sampler.h). A source is a seeded, resumable
// sequence: state() captures its position and generator so that a checkpoint
// restores the exact batches an uninterrupted run would have drawn.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace tinyllama {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // batch rows of seq+1 tokens, concatenated.
  virtual std::vector<std::int32_t> next_batch(int batch) = 0;
  // The position and generator, as JSON (a checkpoint stores it).
  virtual nlohmann::json state() const = 0;
  // Back to a state() of a source built the same way. Throws UsageError
  // when the state belongs to another kind of source or other data.
  virtual void restore(const nlohmann::json& state) = 0;
};

}  // namespace tinyllama
