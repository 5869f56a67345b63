#pragma once
// Choosing a level (DESIGN §2): a named preset of toggles, then the
// --enable-*/--disable-* flags on top for ablation. The result does not
// depend on the order of the flags on the command line: preset first, then
// the all-fusion pair, then each toggle's own pair.
#include <string>
#include <string_view>

#include "model/config.h"

namespace tinyllama {

// The preset used when --version is not given. Kept in one place so that it
// moves to the fastest level as soon as that level is implemented.
inline constexpr std::string_view kDefaultLevel = "v2";

// Throws UsageError for unknown names and for levels not implemented yet.
LevelOptions level_preset(const std::string& name);

// Whether --enable-X and/or --disable-X were given.
struct TogglePair {
  bool enable = false;
  bool disable = false;
};

struct ToggleFlags {
  TogglePair all_fusion;  // every toggle below at once, like the workshop's flag
  TogglePair qkv_fusion;
  TogglePair swiglu_fusion;
  TogglePair flash_attention;
  TogglePair cuda_graphs;
  TogglePair fused_optimizer;
};

// Throws UsageError when both halves of a pair are given.
LevelOptions apply_toggle_flags(LevelOptions preset, const ToggleFlags& flags);

}  // namespace tinyllama
