#pragma once
// `tinyllama validate`: which cases run on which device, the table row of a
// finished case and the machine-readable report.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/numerics_check.h"

namespace tinyllama {

// Every validation config x level, on the CPU backend in float32 and, with
// `cuda`, on the CUDA backend in float32, bfloat16 and float16.
std::vector<NumericsCase> validation_cases(const std::vector<std::string>& levels, bool cpu,
                                           bool cuda);

struct ValidationRun {
  std::vector<NumericsResult> results;
  // Whole devices or precisions not checked, with why (not failures).
  std::vector<std::string> skipped;
  int failures() const;
};

// The table's header and one row per case: for the loss, the worst
// gradient and the AdamW step, the error and its limit at the step where
// the error is nearest the limit, then PASS or FAIL.
std::string validation_header();
std::string validation_row(const NumericsResult& r);
// "validate: PASS, 27 cases ..." / "validate: FAIL, 2 of 27 cases ...".
std::string validation_verdict(const ValidationRun& run);

// --json: every check of every case, the skipped parts and the verdict.
nlohmann::json validation_json(const ValidationRun& run);

}  // namespace tinyllama
