// libFuzzer target: the safetensors reader on arbitrary bytes. Every input
// must be either parsed or refused with RuntimeFailure; anything else (a
// crash, a sanitizer report, another exception, a hang) is a bug.
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tinyllama::NamedTensors t = tinyllama::parse_safetensors("fuzz", data, size);
    std::size_t bytes = 0;
    for (const auto& [name, tensor] : t) bytes += tensor.bytes.size();
    if (bytes > size) __builtin_trap();  // tensors can only come from the input
  } catch (const tinyllama::RuntimeFailure&) {
  }
  return 0;
}
