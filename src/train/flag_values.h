#pragma once
// Turns the text of a command-line value into a typed value, or a UsageError
// naming the flag, the value and what is allowed (DESIGN §4). Kept out of the
// CLI so the rules are unit-tested and shared by every front end.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "model/step_plan.h"

namespace tinyllama {

// Whole-string parses: "12abc", "1.5" (for an integer) and "" are rejected.
int parse_int_flag(std::string_view flag, const std::string& text);
std::uint64_t parse_uint64_flag(std::string_view flag, const std::string& text);
double parse_real_flag(std::string_view flag, const std::string& text);

DeviceKind parse_device(const std::string& text);       // cpu | cuda
Precision parse_amp_dtype(const std::string& text);     // bfloat16 | float16 | float8
Fp8Choice parse_fp8_gemms(const std::string& text);     // auto | all
Fp8Scaling parse_fp8_scaling(const std::string& text);  // current | delayed

}  // namespace tinyllama
