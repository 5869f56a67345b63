#pragma once
// Element types that tensors in tinyllama can hold.
#include <cstddef>
#include <string_view>

namespace tinyllama {

enum class DType { F32, F64, BF16, F16 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F64:
      return 8;
    case DType::BF16:
    case DType::F16:
      return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::F64:
      return "float64";
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "float16";
  }
  return "?";
}

}  // namespace tinyllama
