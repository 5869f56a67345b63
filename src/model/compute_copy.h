#pragma once
// Where the low-precision copy of the parameters lives under AMP: the
// master layout's order with the slots that keep no copy cut out, their
// padding with them. Under --amp-dtype float8 a linear whose every GEMM
// reading its weight runs in FP8 keeps none: its FP8 casts read the fp32
// master as its bf16 values (Fp8Linears::master_weights), so the copy
// would only be written, never read.
#include <cstdint>
#include <vector>

#include "model/param_layout.h"
#include "model/step_plan.h"

namespace tinyllama {

class ComputeCopyLayout {
 public:
  // keeps[i]: whether slot i of layout.slots() has a copy. The layout must
  // outlive this.
  ComputeCopyLayout(const ParamLayout& layout, std::vector<bool> keeps);
  // The copy a plan keeps: every slot under AMP, less the FP8 linears'
  // weights that plan.fp8.keeps_bf16_weight leaves out; none without AMP.
  ComputeCopyLayout(const ParamLayout& layout, const StepPlan& plan);

  // Whether the slot at master offset `offset` has a copy.
  bool keeps(std::int64_t offset) const;
  // The copy's element offset of master offset `offset`, in a kept run.
  std::int64_t offset(std::int64_t offset) const;
  std::int64_t total() const { return total_; }
  // The runs of `range`, group 1 where kept and 0 where not.
  std::vector<SlotRun> runs(ParamSpan range) const;

 private:
  const SlotRun& run_at(std::int64_t offset) const;

  const ParamLayout* layout_;
  std::vector<bool> keeps_;
  std::vector<SlotRun> runs_;           // over [0, layout.total())
  std::vector<std::int64_t> run_copy_;  // each run's copy offset (kept runs)
  std::int64_t total_ = 0;
};

}  // namespace tinyllama
